"""The blocking client against the *official* MCP Python SDK's server (mcp==2.3.0, `.venv-peers`).

`scripts/peers/sdk_stdio_server.py` serves `echo(text)` and `add_tool()` (registers `dyn_N`
and publishes a tools list change to `subscriptions/listen` streams). In mode "auto" the client must
find the SDK's 2026-07-28 support by probing; "legacy" forces the handshake; "modern" forces
2026-07-28. In the handshake era the SDK declares `tools.listChanged: false` and pushes nothing, so
there the test only checks the change is visible by listing again.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

import mcpsync
from mcpsync import ListChanged, SessionClosed
from mcpsync.protocol.versions import Era

from wire import DEFAULT_TIMEOUT as LONG
from wire import children_of

pytestmark = pytest.mark.timeout(60)

SDK_SERVER = Path(__file__).resolve().parents[1] / "scripts" / "peers" / "sdk_stdio_server.py"
MODES = ["auto", "legacy", "modern"]
ERA_OF = {"auto": Era.MODERN, "legacy": Era.HANDSHAKE, "modern": Era.MODERN}


@pytest.fixture(autouse=True)
def no_thread_left():
    before = set(threading.enumerate())
    yield
    leaked = [thread for thread in threading.enumerate() if thread not in before]
    for thread in leaked:
        thread.join(LONG)
    assert not [thread.name for thread in leaked if thread.is_alive()], "threads left running"


@pytest.fixture
def sdk(peers_python: str):
    """sdk(mode) -> a session with the SDK's server; closed afterwards."""
    sessions: list[mcpsync.ClientSession] = []

    def open_(mode: str) -> mcpsync.ClientSession:
        session = mcpsync.connect([peers_python, str(SDK_SERVER)], mode=mode, timeout=LONG, cwd=str(SDK_SERVER.parent))
        sessions.append(session)
        return session

    yield open_
    for session in sessions:
        session.close()


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def tool_names(session: mcpsync.ClientSession) -> list[str]:
    return [tool["name"] for tool in session.list_tools()]


@pytest.mark.parametrize("mode", MODES)
def test_tools_and_calls(sdk, mode: str) -> None:
    session = sdk(mode)
    assert session.era is ERA_OF[mode]
    assert session.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert session.server_info["name"] == "mcpsync-peer-sdk"
    assert tool_names(session) == ["echo", "add_tool"]
    assert text_of(session.call_tool("echo", {"text": "héllo"})) == "héllo"
    unknown = session.call_tool("nosuch")  # the SDK reports an unknown tool as a tool error
    assert unknown["isError"] is True and "nosuch" in text_of(unknown)
    assert session.list_prompts() == [] and session.list_resources() == [] and session.list_resource_templates() == []


@pytest.mark.parametrize("mode", ["auto", "modern"])
def test_listen_hears_add_tool(sdk, mode: str) -> None:
    session = sdk(mode)
    with session.listen(prompts=False) as listener:
        assert listener.accepted.get("toolsListChanged") is True
        assert text_of(session.call_tool("add_tool")) == "dyn_1"
        assert listener.next_event(LONG) == ListChanged("tools")
        assert tool_names(session) == ["echo", "add_tool", "dyn_1"]
        assert text_of(session.call_tool("dyn_1")) == "dyn_1"
    assert listener.closed
    # The closed listen is cancelled; the SDK goes on serving, and a new listen hears the next change.
    with session.listen() as again:
        assert text_of(session.call_tool("add_tool")) == "dyn_2"
        assert again.next_event(LONG) == ListChanged("tools")
    assert listener.next_event(0) is None


def test_handshake_era_listen_with_a_server_that_pushes_nothing(sdk) -> None:
    session = sdk("legacy")
    assert session.server_capabilities["tools"]["listChanged"] is False
    with session.listen() as listener:
        assert text_of(session.call_tool("add_tool")) == "dyn_1"
        assert tool_names(session) == ["echo", "add_tool", "dyn_1"]
        assert listener.next_event(0) is None  # a notification would have come before the result


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_calls_and_a_clean_close(sdk, mode: str) -> None:
    before = set(children_of(os.getpid()))
    session = sdk(mode)
    (pid,) = set(children_of(os.getpid())) - before
    count = 8
    barrier = threading.Barrier(count, timeout=LONG)
    outcome: dict[int, Any] = {}

    def call(index: int) -> None:
        try:
            barrier.wait()
            outcome[index] = text_of(session.call_tool("echo", {"text": f"caller-{index}"}))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion
            outcome[index] = exc

    threads = [threading.Thread(target=call, args=(i,), name=f"test-sdk-caller-{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    assert outcome == {i: f"caller-{i}" for i in range(count)}
    session.close()
    assert not os.path.exists(f"/proc/{pid}")
    with pytest.raises(SessionClosed):
        session.list_tools()
