"""The official Python SDK client's whole session leaves nothing for the garbage collector in
mcpsync's HTTP server.

`tests/transport/test_request_garbage.py` proves it for calls made with `http.client`; a real
client does more on the same connection: a GET stream beside its POSTs (the handshake era), a
`subscriptions/listen` stream (2026-07-28), a call that streams its progress, a header mirrored
from an argument, a catalog change told to a listener, and (handshake era) a DELETE at the end.
Each request's objects must be freed by reference counting when it ends, or a busy server runs
the collector over them on the hot path, and an application that pauses the collector
(`gc.disable()`, `gc.freeze()`) leaks them. The server runs in this process, so its leftovers can
be counted; the SDK client (the peers venv's `mcp`, integration/sdk_http_driver.py) runs in its
own.
"""

from __future__ import annotations

import json
import runpy
import subprocess
from pathlib import Path
from typing import Any

import pytest
from wire import FIXTURES, REPO_ROOT

from mcpsync import Server
from tests._garbage import our_garbage_after
from tests._timeouts import LONG

pytestmark = pytest.mark.timeout(150)

DRIVER = Path(__file__).with_name("sdk_http_driver.py")


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_the_official_sdk_clients_session_leaves_no_reference_cycles(mode: str, peers_python: str, bounded: Any) -> None:
    server: Server = runpy.run_path(str(FIXTURES / "http_app.py"))["server"]
    runs: list[subprocess.CompletedProcess[str]] = []
    try:
        url = server.start_http("127.0.0.1", 0).url

        def sessions() -> None:
            for _ in range(2):  # a second session: what the first one's ending left is counted too
                runs.append(bounded([peers_python, str(DRIVER), "--mode", mode, url], timeout=60.0, cwd=REPO_ROOT))

        kept = our_garbage_after(sessions)
    finally:
        assert server.close(LONG)
    for run in runs:
        assert run.returncode == 0, run.stderr
        summary = json.loads(run.stdout)
        assert summary["era"] == ("handshake" if mode == "legacy" else "modern")
        assert summary["echo"] == "hi" and summary["progress"] == [1, 2, 3]
    assert kept == []
