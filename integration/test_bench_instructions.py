"""scripts/bench-instructions, run as a real process: `mcpsync serve` under the real valgrind
(callgrind), answering tools/call in both eras over stdio (pipelined) and over HTTP (one keep-alive
connection); the figure per call it prints is the difference of two counted runs, so it must come
out positive and of a request's size."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from wire import REPO_ROOT, base_env

pytestmark = pytest.mark.timeout(300)

SCRIPT = REPO_ROOT / "scripts" / "bench-instructions"
PROCESS_LIMIT_S = 240  # eight runs under callgrind, some 5 s each here; the bound is for a hang
LINE = re.compile(r"^((?:stdio|http) (?:handshake|2026-07-28)): ([\d,]+) instructions per tools/call \(100 calls, opening alone ([\d,]+), with the calls ([\d,]+)\)$")


def test_both_transports_and_eras_get_a_count_per_call(bounded: Any) -> None:
    done = bounded([sys.executable, str(SCRIPT), "--calls", "100"], timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    found = [LINE.match(line) for line in done.stdout.splitlines()]
    assert [match.group(1) for match in found if match] == ["stdio handshake", "stdio 2026-07-28", "http handshake", "http 2026-07-28"], done.stdout
    for match in found:
        assert match is not None
        per_call, alone, loaded = (int(match.group(n).replace(",", "")) for n in (2, 3, 4))
        assert alone < loaded and per_call == round((loaded - alone) / 100), match.group(0)
        assert 10_000 < per_call < 10_000_000, match.group(0)  # a request, not a start-up nor nothing


def test_an_unknown_era_is_a_usage_error(bounded: Any) -> None:
    done = bounded([sys.executable, str(SCRIPT), "--eras", "2024"], timeout=60, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 2 and "--eras takes handshake, 2026-07-28" in done.stderr, done.stderr


def test_an_unknown_transport_is_a_usage_error(bounded: Any) -> None:
    done = bounded([sys.executable, str(SCRIPT), "--transports", "sse"], timeout=60, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 2 and "--transports takes stdio, http" in done.stderr, done.stderr


PROTECTED = re.compile(r"^http\+auth handshake: ([\d,]+) instructions per tools/call \(20 calls, ")


def test_auth_counts_a_protected_server_answering_the_token_it_was_given(bounded: Any) -> None:
    """The counted server checks the JWT of every request (a refused token would end the run: its
    calls would be answered 401), so the line is a protected request's cost."""
    done = bounded([sys.executable, str(SCRIPT), "--auth", "--transports", "http", "--eras", "handshake", "--calls", "20"],
                   timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    found = [PROTECTED.match(line) for line in done.stdout.splitlines()]
    counts = [int(match.group(1).replace(",", "")) for match in found if match]
    assert len(counts) == 1 and 10_000 < counts[0] < 10_000_000, done.stdout


def test_auth_over_stdio_is_a_usage_error(bounded: Any) -> None:
    done = bounded([sys.executable, str(SCRIPT), "--auth"], timeout=60, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 2 and "--auth protects the HTTP server: give --transports http with it" in done.stderr, done.stderr


LAYER = re.compile(r"^http (floor|server) handshake: ([\d,]+) instructions per tools/call \(20 calls, ")
WHOLE = re.compile(r"^http handshake: ([\d,]+) instructions per tools/call \(20 calls, ")
SPLIT = re.compile(r"^http handshake by layer: the floor ([\d,]+) \(\d+%\), mcpsync's HTTP server \+([\d,]+) \(\d+%\), "
                   r"the MCP endpoint and engine \+([\d,]+) \(\d+%\)$")


def test_layers_count_the_floor_and_the_http_server_below_the_whole_request(bounded: Any) -> None:
    """Each layer is a real server answering every call under callgrind (one that failed would end
    the run); each adds to the one below it, and the split adds up to the whole request's count."""
    done = bounded([sys.executable, str(SCRIPT), "--layers", "--transports", "http", "--eras", "handshake", "--calls", "20"],
                   timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    layers = {match.group(1): int(match.group(2).replace(",", "")) for match in map(LAYER.match, lines) if match}
    wholes = [match for match in map(WHOLE.match, lines) if match]
    splits = [match for match in map(SPLIT.match, lines) if match]
    assert set(layers) == {"floor", "server"} and len(wholes) == 1 and len(splits) == 1, done.stdout
    whole = int(wholes[0].group(1).replace(",", ""))
    assert 10_000 < layers["floor"] < layers["server"] < whole, done.stdout
    floor, server_adds, mcp_adds = (int(splits[0].group(n).replace(",", "")) for n in (1, 2, 3))
    assert (floor, floor + server_adds, floor + server_adds + mcp_adds) == (layers["floor"], layers["server"], whole), done.stdout


@pytest.mark.parametrize(("arguments", "said"), [
    (["--layers", "--transports", "stdio"], "--layers splits an HTTP request: give http in --transports"),
    (["--layers", "--auth", "--transports", "http"], "--layers counts unprotected servers: give it without --auth"),
])
def test_layers_with_what_it_cannot_split_is_a_usage_error(bounded: Any, arguments: list[str], said: str) -> None:
    done = bounded([sys.executable, str(SCRIPT), *arguments], timeout=60, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 2 and said in done.stderr, done.stderr
