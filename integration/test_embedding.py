"""Embedding: `Server.start_stdio()` inside an app whose main thread keeps working."""

from __future__ import annotations

import sys

import pytest

from wire import ServerProcess, base_env, fixture, legacy_init

pytestmark = pytest.mark.timeout(60)


def embedded() -> ServerProcess:
    return ServerProcess([sys.executable, fixture("embedded_app.py")], env=base_env())


def test_add_service_at_runtime_reaches_the_client_and_shutdown_from_the_app_ends_cleanly() -> None:
    with embedded() as app:
        legacy_init(app)
        grow = app.request("tools/call", {"name": "grow"})
        assert grow["result"]["content"][0]["text"] == "queued"
        change = app.expect(lambda f: f.get("method") == "notifications/tools/list_changed")
        assert "params" not in change or "_meta" not in change.get("params", {})
        tools = app.result("tools/list")["tools"]
        assert "grown" in [tool["name"] for tool in tools]
        assert app.result("tools/call", {"name": "grown"})["content"][0]["text"] == "grown"
        app.request("tools/call", {"name": "stop"})
        assert app.wait_exit() == 0
        assert "app: serving in the background" in app.stderr_text()  # fd 1 pointed at stderr while serving
        assert app.raw_stdout.endswith(b"app: done\n")  # and is the app's own stdout again afterwards
        assert "Traceback" not in app.stderr_text()


def test_end_of_input_stops_the_embedded_server_and_the_app_goes_on() -> None:
    with embedded() as app:
        legacy_init(app)
        app.close_stdin()
        assert app.wait_exit() == 0
        assert app.raw_stdout.endswith(b"app: done\n")
