"""A gateway's forwarded calls leave nothing for the garbage collector.

A gateway forwards every call through several objects that point at each other while the call
runs (the request's context, its exchange, the upstream call, the client's pending call). Each
must be freed by reference counting once the call is answered: a cycle left behind per call
makes a busy gateway run the collector over all of them, on the hot path. Real pipes, a real
upstream child (`python -m mcpsync serve`, the demo); the collector is paused while calls run.
"""

from __future__ import annotations

import sys
from typing import Iterator

import pytest

from mcpsync import Server

from .._garbage import our_garbage_after
from .._timeouts import LONG
from ..transport.pipes import PipeClient, modern

pytestmark = pytest.mark.timeout(60)

CALLS = 20


@pytest.fixture
def gateway() -> Iterator[Server]:
    server = Server("gw")
    server.add_remote("up", [sys.executable, "-m", "mcpsync", "serve"], timeout=LONG)
    yield server
    server.close(timeout=LONG)


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
def test_forwarded_calls_leave_no_reference_cycles(gateway: Server, era: str) -> None:
    with PipeClient(gateway) as client:
        if era == "handshake":
            assert "result" in client.initialize()
        wrap = modern if era == "2026-07-28" else (lambda params: params)

        def calls() -> None:
            for n in range(CALLS):
                response, _ = client.request("tools/call", wrap({"name": "echo", "arguments": {"text": f"t{n}"}}), id=n)
                assert response["result"]["content"][0]["text"] == f"t{n}"

        calls()  # the first calls warm up lazily built state (listings, caches)
        assert our_garbage_after(calls) == []
