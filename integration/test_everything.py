"""mcpsync against a real upstream nobody here wrote: @modelcontextprotocol/server-everything.

The MCP reference server from npm (Node, the official TypeScript SDK), installed pinned in
``.peers-npm/`` by ``scripts/peers-npm``. It is a handshake-era server: it answers
``server/discover`` with -32601, speaks ``initialize`` up to 2025-11-25, and has the tools used here:

* ``echo {message}`` -> text ``"Echo: <message>"``
* ``get-sum {a, b}`` -> text ``"The sum of <a> and <b> is <a+b>."``
* ``trigger-long-running-operation {duration, steps}`` -> one ``notifications/progress`` per step
  (progress 1..steps, total steps) when the request carries a progressToken

How it is started (its dist/index.js is the package's ``bin``): ``node ENTRY [stdio]`` for stdio,
``PORT=N node ENTRY streamableHttp`` for Streamable HTTP on ``http://127.0.0.1:N/mcp`` (the port
is announced on stderr: "MCP Streamable HTTP Server listening on port N").

What is checked:

1. mcpsync's client (``mcpsync.connect``) in modes auto (must fall back to initialize) and legacy.
2. The gateway, ``python -m mcpsync serve --upstream "<node> <entry> stdio"``, driven in raw JSON in
   both downstream eras: the upstream's results come through unchanged in the handshake era, and
   dressed as mcpsync's own (resultType, the gateway's serverInfo) with nothing of the upstream's
   era leaking in 2026-07-28.
3. Its Streamable HTTP mode answers (raw HTTP), and mcpsync's client talks to it over HTTP.

A missing node/npm or a failed install fails (never skips) these tests.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

import mcpsync
from mcpsync.protocol.versions import Era
from wire import (
    HANDSHAKE_VERSION,
    META_SERVER_INFO,
    MODERN_VERSION,
    ServerProcess,
    is_notification,
    legacy_init,
    modern_meta,
    serve_argv,
)

pytestmark = pytest.mark.timeout(120)


UPSTREAM_NAME = "mcp-servers/everything"
GATEWAY_NAME = "mcpsync-gateway"  # `serve` with only --upstream: no local service, the gateway's name
UPSTREAM_TOOLS = {"echo", "get-sum", "trigger-long-running-operation"}
ERA_MARKERS = ("resultType", "ttlMs", "cacheScope")
CALL_RESULT_KEYS = {"content", "structuredContent", "isError", "_meta"}
TEXT = "héllo, wörld ✓"


# -- the peer ---------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def everything(node: str, npm_entry: Any) -> list[str]:
    """``[node, ENTRY]``: the command that starts server-everything (add a transport argument)."""
    return [node, npm_entry("everything")]


@pytest.fixture
def upstream_stderr() -> Iterator[Any]:
    """A file for the upstream child's stderr (the client does not read it; a pipe could fill)."""
    with tempfile.TemporaryFile() as file:
        yield file


def text_of(result: dict[str, Any]) -> str:
    content = result.get("content")
    assert isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text", result
    return content[0]["text"]


def assert_increasing_progress(seen: list[tuple[Any, Any]], steps: int) -> None:
    """One notification per step: progress 1..steps, strictly increasing, total = steps."""
    assert [p for p, _ in seen] == list(range(1, steps + 1)), seen
    assert all(total == steps for _, total in seen), seen


# -- 1. mcpsync's client ----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_client_against_everything(everything: list[str], upstream_stderr: Any, mode: str) -> None:
    started = time.monotonic()
    with mcpsync.connect([*everything, "stdio"], mode=mode, timeout=30, stderr=upstream_stderr) as session:
        connect_s = time.monotonic() - started
        # auto: server/discover is answered -32601, so the client falls back to initialize at once
        # (not after the probe timeout).
        assert session.era is Era.HANDSHAKE
        assert session.protocol_version == HANDSHAKE_VERSION
        assert session.server_info.get("name") == UPSTREAM_NAME, session.server_info
        assert "tools" in session.server_capabilities
        assert connect_s < 10, f"connect took {connect_s:.1f} s"

        tools = {tool["name"]: tool for tool in session.list_tools()}
        assert UPSTREAM_TOOLS <= set(tools), sorted(tools)
        assert tools["echo"]["inputSchema"]["required"] == ["message"]

        echoed = session.call_tool("echo", {"message": TEXT})
        assert not echoed.get("isError"), echoed
        assert text_of(echoed) == f"Echo: {TEXT}"

        summed = session.call_tool("get-sum", {"a": 2, "b": 3.5})
        assert not summed.get("isError"), summed
        assert text_of(summed) == "The sum of 2 and 3.5 is 5.5."

        # A tool-level failure is a result with isError (the upstream validates its own arguments).
        invalid = session.call_tool("echo", {})
        assert invalid.get("isError") is True, invalid

        seen: list[tuple[Any, Any]] = []
        done = session.call_tool(
            "trigger-long-running-operation",
            {"duration": 0.5, "steps": 5},
            progress=lambda progress, total, message: seen.append((progress, total)),
        )
        assert not done.get("isError"), done
        assert "completed" in text_of(done)
        assert_increasing_progress(seen, 5)


# -- 2. the gateway in front of it ------------------------------------------------------------------

@pytest.fixture
def gateway(everything: list[str]) -> Iterator[ServerProcess]:
    """``python -m mcpsync serve --upstream "<node> <entry> stdio"``: no local services."""
    with ServerProcess(serve_argv("--upstream", shlex.join([*everything, "stdio"]))) as proc:
        yield proc
        assert "Traceback (most recent call last)" not in proc.stderr_text(), proc.stderr_tail()


def progress_of(frames: list[dict[str, Any]], token: Any) -> list[tuple[Any, Any]]:
    """(progress, total) of the progress notifications for `token`, in arrival order."""
    return [
        (frame["params"]["progress"], frame["params"].get("total"))
        for frame in frames
        if is_notification(frame, "notifications/progress") and frame["params"].get("progressToken") == token
    ]


def test_gateway_handshake_era(gateway: ServerProcess) -> None:
    init = legacy_init(gateway)
    assert init["protocolVersion"] == HANDSHAKE_VERSION
    assert init["serverInfo"]["name"] == GATEWAY_NAME, init
    assert "tools" in init["capabilities"], init

    listed = gateway.result("tools/list")
    assert set(listed) <= {"tools", "nextCursor"}, listed.keys()  # no 2026-07-28 dressing
    names = {tool["name"] for tool in listed["tools"]}
    assert UPSTREAM_TOOLS <= names, sorted(names)
    assert not names & {"add", "word_stats", "countdown", "fail"}, "the demo service must not be served"

    echoed = gateway.result("tools/call", {"name": "echo", "arguments": {"message": TEXT}})
    assert echoed == {"content": [{"type": "text", "text": f"Echo: {TEXT}"}]}, echoed

    summed = gateway.result("tools/call", {"name": "get-sum", "arguments": {"a": 40, "b": 2}})
    assert text_of(summed) == "The sum of 40 and 2 is 42."

    done = gateway.result(
        "tools/call",
        {"name": "trigger-long-running-operation", "arguments": {"duration": 0.3, "steps": 3}, "_meta": {"progressToken": "tok-h"}},
    )
    assert "completed" in text_of(done)
    assert not any(marker in done for marker in ERA_MARKERS), done
    assert_increasing_progress(progress_of(gateway.notifications, "tok-h"), 3)


def assert_dressed_as_gateway(result: dict[str, Any]) -> None:
    """A 2026-07-28 result of the gateway: complete, the gateway's serverInfo, nothing upstream-era."""
    assert result.get("resultType") == "complete", result
    meta = result.get("_meta")
    assert isinstance(meta, dict) and set(meta) == {META_SERVER_INFO}, result
    assert meta[META_SERVER_INFO]["name"] == GATEWAY_NAME, meta
    for leaked in ("protocolVersion", "serverInfo", "capabilities", "instructions"):
        assert leaked not in result, (leaked, result)


def test_gateway_modern_era(gateway: ServerProcess) -> None:
    discover = gateway.result("server/discover", {"_meta": modern_meta()})
    assert discover["supportedVersions"] == [MODERN_VERSION], discover
    assert discover["_meta"][META_SERVER_INFO]["name"] == GATEWAY_NAME, discover
    assert "tools" in discover["capabilities"], discover

    listed = gateway.result("tools/list", {"_meta": modern_meta()})
    assert_dressed_as_gateway(listed)
    names = {tool["name"] for tool in listed["tools"]}
    assert UPSTREAM_TOOLS <= names, sorted(names)

    echoed = gateway.result("tools/call", {"name": "echo", "arguments": {"message": TEXT}, "_meta": modern_meta()})
    assert_dressed_as_gateway(echoed)
    assert set(echoed) <= CALL_RESULT_KEYS | {"resultType"}, echoed.keys()
    assert echoed["content"] == [{"type": "text", "text": f"Echo: {TEXT}"}], echoed
    assert "isError" not in echoed or echoed["isError"] is False, echoed

    done = gateway.result(
        "tools/call",
        {"name": "trigger-long-running-operation", "arguments": {"duration": 0.3, "steps": 3}, "_meta": modern_meta(progressToken="tok-m")},
    )
    assert_dressed_as_gateway(done)
    assert "completed" in text_of(done)
    assert_increasing_progress(progress_of(gateway.notifications, "tok-m"), 3)


# -- 3. its Streamable HTTP mode --------------------------------------------------------------------

HTTP_READY = "listening on port"
HTTP_START_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def everything_http(everything: list[str]) -> Iterator[str]:
    """server-everything in Streamable HTTP mode; yields its endpoint URL (``http://127.0.0.1:N/mcp``)."""
    last_error = ""
    for _attempt in range(3):  # the free port may be taken before node binds it
        port = free_port()
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen(
                [*everything, "streamableHttp"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**os.environ, "PORT": str(port)},
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + HTTP_START_TIMEOUT
                while time.monotonic() < deadline and proc.poll() is None:
                    log.seek(0)
                    if HTTP_READY in log.read().decode("utf-8", "replace"):
                        break
                    time.sleep(0.05)  # polling the log file for the ready line: nothing signals a write to it
                log.seek(0)
                output = log.read().decode("utf-8", "replace")
                if proc.poll() is None and HTTP_READY in output:
                    yield f"http://127.0.0.1:{port}/mcp"
                    return
                last_error = f"exit status {proc.poll()}, output:\n{output}"
                if "EADDRINUSE" not in output and "already in use" not in output:
                    break
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, 9)
                proc.wait(timeout=10)
    pytest.fail(f"server-everything did not start in streamableHttp mode: {last_error}", pytrace=False)


def http_post(url: str, message: dict[str, Any], session_id: str | None = None) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
    """POST one JSON-RPC message; returns (status, lower-cased headers, the JSON-RPC messages of
    the answer, whether it came as application/json or as an SSE stream)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
        headers["Mcp-Protocol-Version"] = HANDSHAKE_VERSION
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, got_headers, body = response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        status, got_headers, body = exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()
    text = body.decode("utf-8")
    if got_headers.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    else:
        messages = [json.loads(text)] if text.strip() else []
    return status, got_headers, messages


def test_everything_streamable_http_answers(everything_http: str) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    status, headers, messages = http_post(everything_http, init)
    assert status == 200, (status, messages)
    session_id = headers.get("mcp-session-id")
    assert session_id, headers
    (answer,) = [m for m in messages if m.get("id") == 1]
    assert answer["result"]["protocolVersion"] == HANDSHAKE_VERSION, answer
    assert answer["result"]["serverInfo"]["name"] == UPSTREAM_NAME, answer

    status, _, _ = http_post(everything_http, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id)
    assert status == 202, status
    status, _, messages = http_post(everything_http, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session_id)
    assert status == 200, (status, messages)
    (listed,) = [m for m in messages if m.get("id") == 2]
    assert UPSTREAM_TOOLS <= {tool["name"] for tool in listed["result"]["tools"]}, listed


def test_client_over_streamable_http(everything_http: str) -> None:
    """mcpsync.connect(URL) against server-everything's Streamable HTTP endpoint. Note for the HTTP
    client: this server answers a `server/discover` probe sent before initialize with HTTP 400 and
    a JSON-RPC error -32000 "Bad Request: Server not initialized" whose id is null; mode auto must
    treat that as "not a 2026-07-28 server" and fall back to initialize."""
    with mcpsync.connect(everything_http, mode="auto", timeout=30) as session:
        assert session.era is Era.HANDSHAKE
        assert session.server_info.get("name") == UPSTREAM_NAME, session.server_info
        assert UPSTREAM_TOOLS <= {tool["name"] for tool in session.list_tools()}
        assert text_of(session.call_tool("echo", {"message": TEXT})) == f"Echo: {TEXT}"
        seen: list[tuple[Any, Any]] = []
        done = session.call_tool(
            "trigger-long-running-operation",
            {"duration": 0.3, "steps": 3},
            progress=lambda progress, total, message: seen.append((progress, total)),
        )
        assert "completed" in text_of(done)
        assert_increasing_progress(seen, 3)


def test_inspect_draws_server_everything_on_one_page(everything: list[str]) -> None:
    """`mcpsync inspect` on a server nobody here wrote: every section, its enum and default
    parameters, its structured output and its templates, read from what it declares."""
    done = subprocess.run(
        [sys.executable, "-m", "mcpsync", "inspect", "--", *everything], capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{UPSTREAM_NAME} ") and "(MCP 2025-11-25)" in lines[0]
    assert any(line.startswith("  echo(message: string)") for line in lines)
    assert any(line.startswith('  get-structured-content(location: "New York"|"Chicago"|"Los Angeles") -> {temperature: number') for line in lines)
    assert any(line.startswith("  args-prompt(city, state?)") for line in lines)
    for section in ("tools (", "prompts (", "resources (", "resource templates ("):
        assert any(line.startswith(section) for line in lines), section
