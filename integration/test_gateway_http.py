"""The gateway in front of Streamable HTTP upstreams: `mcpsync serve --upstream http://...`.

Two upstreams nobody in mcpsync wrote the server side of:

* fixtures/upstream_http_mock.py, a standard-library HTTP server of the handshake era (2025-11-25
  rules: `initialize` opens an `Mcp-Session-Id` session, `MCP-Protocol-Version` checked on every
  later request, an optional GET stream, DELETE). Its `add_tool` announces the change the way that
  era relates a notification to a request: on the SSE stream answering the `tools/call`, ahead of
  the result (or, when asked, on the session's GET stream). Its `stats` tool reports every HTTP
  request it received, so a test sees through the gateway what reached the upstream.
* @modelcontextprotocol/server-everything from npm in its Streamable HTTP mode (scripts/peers-npm).

The reference flow (the issue's): a handshake-era HTTP mock upstream behind `mcpsync serve`; a
2026-07-28 client runs discover, listen and tools/list, then calls a tool that makes the upstream add
a tool. The tagged change arrives before that call's result, the re-list includes the new tool, the
new tool is callable, and shutdown completes the subscription. Then: the same for a handshake-era
client (an untagged change), exactly one change per subscription per add whichever stream carried
it, server-everything listed and called through the gateway (both downstream eras) and through
`mcpsync.connect(URL)`, and an HTTP upstream that goes away and comes back on the same port.

Ordering comes from responses, notifications and the mock's in-order GET stream (its `touch` tool
sends a marker on it), never from sleeping; every wait is bounded; every process started is killed.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

import mcpsync
from mcpsync.protocol.versions import Era
from wire import (
    HANDSHAKE_VERSION,
    GatewayClient,
    MODERN_VERSION,
    ServerProcess,
    fixture,
    has_traceback,
    is_notification,
    is_response,
    modern_meta,
    same_id,
    serve_argv,
    tools_changed,
)

pytestmark = pytest.mark.timeout(90)

SUB = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
MOCK = fixture("upstream_http_mock.py")
MOCK_TOOLS = ["echo", "add_tool", "touch", "stats"]
MOCK_NAME = "http-mock-upstream"
START_WAIT = 15.0  # a Python (or node) child printing that it listens
LOSS_WAIT = 15.0  # a dead HTTP upstream noticed: its GET stream ends, a few re-opens at ~1 s fail
RESTART_WAIT = 30.0  # the supervisor's backoff (0.5 s doubling, capped at 30 s) plus a connect

EVERYTHING_NAME = "mcp-servers/everything"
EVERYTHING_TOOLS = {"echo", "get-sum", "trigger-long-running-operation"}
EVERYTHING_READY = "listening on port"
PEERS_NPM_TIMEOUT = 100.0
NPM_INSTALL_TIMEOUT = 90
TEXT = "héllo, wörld ✓"
DEFAULT_WAIT = 10.0


# -- the HTTP mock upstream -----------------------------------------------------------------------

class MockUpstream:
    """fixtures/upstream_http_mock.py as a child process; `url` once it listens. `kill()` it (the
    upstream goes away) and `start()` it again on the same port. Use as a context manager: leaving
    kills it."""

    def __init__(self, *args: str) -> None:
        self.args = list(args)
        self.url = ""
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr = tempfile.TemporaryFile()

    def __enter__(self) -> "MockUpstream":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
        self._stderr.close()

    def start(self) -> "MockUpstream":
        """Start it (on the port it had, after the first time) and wait for its URL line."""
        assert self.proc is None or self.proc.poll() is not None, "the mock is already running"
        argv = [sys.executable, MOCK, *self.args]
        if self.port:
            argv += ["--port", str(self.port)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr)
        try:
            line = self._first_line(self.proc)
            assert line.startswith("http://127.0.0.1:") and line.endswith("/mcp"), line
            port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
            assert not self.port or port == self.port, (port, self.port)
        except BaseException:
            self.kill()
            raise
        self.url, self.port = line, port
        return self

    def _first_line(self, proc: subprocess.Popen[bytes]) -> str:
        lines: queue.Queue[bytes] = queue.Queue()
        stdout = proc.stdout
        assert stdout is not None

        def pump() -> None:  # until the child's stdout closes (it prints only the URL)
            for line in iter(stdout.readline, b""):
                lines.put(line)
            lines.put(b"")

        threading.Thread(target=pump, name="mock-stdout", daemon=True).start()
        try:
            line = lines.get(timeout=START_WAIT)
        except queue.Empty:
            raise AssertionError(f"the HTTP mock printed no URL within {START_WAIT}s\n{self.stderr_text()}") from None
        if not line:
            raise AssertionError(f"the HTTP mock exited ({proc.wait(timeout=10)}) before printing its URL\n{self.stderr_text()}")
        return line.decode().strip()

    def kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")


def http_rpc(url: str, message: dict[str, Any], session: str | None = None, version: str | None = None) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
    """POST one JSON-RPC message with urllib (not mcpsync): (status, lower-cased headers, the
    JSON-RPC messages of the answer, from a JSON body or an SSE stream)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, got, body = response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        status, got, body = exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()
    text = body.decode("utf-8")
    if got.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    else:
        messages = [json.loads(text)] if text.strip() else []
    return status, got, messages


class RawSession:
    """A handshake-era session with the mock over urllib: a second client of the upstream, and
    the test's own view of what the upstream saw."""

    def __init__(self, url: str) -> None:
        self.url = url
        init = {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        status, headers, messages = http_rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert status == 200 and messages[0]["result"]["protocolVersion"] == HANDSHAKE_VERSION, (status, messages)
        self.id = headers["mcp-session-id"]
        status, _, _ = http_rpc(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, self.id, HANDSHAKE_VERSION)
        assert status == 202, status

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}
        status, _, messages = http_rpc(self.url, message, self.id, HANDSHAKE_VERSION)
        assert status == 200, (status, messages)
        (answer,) = [m for m in messages if m.get("id") == 2]
        return answer["result"]["content"][0]["text"]

    def stats(self) -> dict[str, Any]:
        return json.loads(self.call("stats"))


def upstream_session(stats: dict[str, Any], raw: RawSession | None = None) -> tuple[str, dict[str, Any]]:
    """The one session of `stats` that is not the test's own: the gateway's."""
    others = {sid: s for sid, s in stats["sessions"].items() if raw is None or sid != raw.id}
    assert len(others) == 1, others
    return next(iter(others.items()))


def assert_spoken_to_properly(stats: dict[str, Any], session: str) -> None:
    """Everything the gateway sent: the server/discover probe (refused, as this era's servers do),
    `initialize` (which minted `session`), and then only requests with the session id and the
    negotiated version, none of them refused (but a GET the server does not offer)."""
    mine = [r for r in stats["requests"] if r["session"] in (None, session)]
    probe, init, *rest = mine
    assert (probe["verb"], probe["method"], probe["status"]) == ("POST", "server/discover", 400), probe
    assert probe["version"] == MODERN_VERSION, "the probe is a 2026-07-28 request"
    assert (init["method"], init["status"], init["session"]) == ("initialize", 200, None), init
    assert rest and rest[0]["method"] == "notifications/initialized", rest
    for request in rest:
        assert request["session"] == session and request["version"] == HANDSHAKE_VERSION, request
        assert request["status"] < 400 or (request["verb"], request["status"]) == ("GET", 405), request


# -- the downstream client and the gateway (as in test_gateway.py) --------------------------------

def gateway(*args: str) -> ServerProcess:
    return ServerProcess(serve_argv(*args))


class Client(GatewayClient):
    is_error_required = False  # upstreams here may leave isError out of their results (it is optional)


def tagged(method: str, subscription: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": {"_meta": {SUB: subscription}}}


def assert_clean_exit(proc: ServerProcess, code: int) -> None:
    assert code == 0, proc.stderr_tail()
    assert not has_traceback(proc.stderr_text()), proc.stderr_tail()


def completes(frames: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The listen completions among `frames`, by the JSON of their id."""
    return {json.dumps(f["id"]): f["result"] for f in frames if is_response(f)}


def heard_after_marker(client: Client, subscription: Any) -> list[dict[str, Any]]:
    """Call the mock's `touch` (through the gateway) and wait for its marker, a prompts change on
    the upstream's GET stream; return every other notification heard on the way. The GET stream is
    in order, so whatever it carried before the marker has been relayed by then. The prompts are
    listed first, so the marker is news to the gateway even if it coalesces unseen changes."""
    proc = client.proc
    assert client.result("prompts/list")["prompts"] == []
    heard = list(proc.notifications)
    assert client.text("touch") == "touched"
    marker = tagged(PROMPTS_CHANGED, subscription) if client.modern else {"jsonrpc": "2.0", "method": PROMPTS_CHANGED}
    heard += [frame for frame in proc.notifications if frame != marker]
    if marker in proc.notifications:
        return heard
    deadline = time.monotonic() + DEFAULT_WAIT
    others = []
    try:
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no marker from the upstream's GET stream; heard {heard}\n{proc.stderr_tail()}"
            frame = proc.recv(timeout=remaining)
            if frame == marker:
                return heard
            (heard if is_notification(frame) else others).append(frame)
    finally:
        proc._backlog.extend(others)  # responses to someone else stay for them


# -- the reference flow ---------------------------------------------------------------------------

@pytest.mark.parametrize("get_stream", [True, False], ids=["get-stream", "get-405"])
def test_reference_flow_modern_client_hears_the_tagged_change_before_the_result(get_stream: bool) -> None:
    with MockUpstream(*([] if get_stream else ["--no-get"])) as mock, gateway("--upstream", mock.url, "--log-level", "info") as proc:
        client = Client(proc, "modern")
        assert client.opened["supportedVersions"] == [MODERN_VERSION]
        assert "tools" in client.opened["capabilities"]
        client.listen("700", toolsListChanged=True)
        client.listen(700, toolsListChanged=True, promptsListChanged=True)  # ids clear of the auto ids
        assert client.tool_names() == MOCK_TOOLS
        response = proc.request("tools/call", client.params({"name": "add_tool", "arguments": {}}), id="call")
        assert response["result"]["content"] == [{"type": "text", "text": "dyn_1"}], response
        assert response["result"]["resultType"] == "complete"
        # Each subscription heard it once, tagged with its own id in its JSON type, before the
        # result; never an untagged copy (this connection never initialized).
        assert proc.notifications == [tagged(TOOLS_CHANGED, "700"), tagged(TOOLS_CHANGED, 700)]
        assert client.tool_names() == [*MOCK_TOOLS, "dyn_1"]
        assert proc.notifications == []
        assert client.text("dyn_1") == "dyn_1"
        if get_stream:  # nothing more came on the GET stream either
            assert heard_after_marker(client, 700) == []

        stats = json.loads(client.text("stats"))
        session, seen = upstream_session(stats)
        assert_spoken_to_properly(stats, session)
        assert seen["protocolVersion"] == HANDSHAKE_VERSION
        assert seen["methods"].count("tools/list") == 2, "one listing before the change, one after"
        assert seen["get_streams"] == (1 if get_stream else 0)
        assert "subscriptions/listen" not in seen["methods"] and "server/discover" not in seen["methods"]

        proc.signal(signal.SIGTERM)
        code = proc.wait_exit()
        done = completes(proc.drain())
        assert_clean_exit(proc, code)
        assert set(done) == {'"700"', "700"}, done
        for key, result in done.items():
            assert result["resultType"] == "complete"
            assert same_id(result["_meta"][SUB], json.loads(key))
        assert "upstream 'upstream1' connected (handshake era)" in proc.stderr_text()
        # The gateway ended its upstream session on the way out.
        raw = RawSession(mock.url)
        assert upstream_session(raw.stats(), raw)[1]["deleted"] is True


@pytest.mark.parametrize("get_stream", [True, False], ids=["get-stream", "get-405"])
def test_reference_flow_handshake_client_hears_an_untagged_change_before_the_result(get_stream: bool) -> None:
    with MockUpstream(*([] if get_stream else ["--no-get"])) as mock, gateway("--upstream", mock.url) as proc:
        client = Client(proc, "handshake")
        assert client.opened["protocolVersion"] == HANDSHAKE_VERSION
        assert client.tool_names() == MOCK_TOOLS
        response = proc.request("tools/call", {"name": "add_tool", "arguments": {}}, id="call")
        assert response["result"] == {"content": [{"type": "text", "text": "dyn_1"}], "isError": False}
        assert proc.notifications == [{"jsonrpc": "2.0", "method": TOOLS_CHANGED}]
        assert client.tool_names() == [*MOCK_TOOLS, "dyn_1"]
        assert client.text("dyn_1") == "dyn_1"
        assert client.text("echo", {"text": TEXT}) == f"echo: {TEXT}"
        assert proc.notifications == []
        if get_stream:  # nothing more came on the GET stream either
            assert heard_after_marker(client, None) == []
        stats = json.loads(client.text("stats"))
        assert_spoken_to_properly(stats, upstream_session(stats)[0])
        code, rest = proc.finish()
        assert_clean_exit(proc, code)
        assert rest == []
        raw = RawSession(mock.url)
        assert upstream_session(raw.stats(), raw)[1]["deleted"] is True


# -- exactly one change per add, whichever stream carried it ---------------------------------------

def test_a_change_on_the_get_stream_reaches_each_subscription_once() -> None:
    with MockUpstream() as mock, gateway("--upstream", mock.url) as proc:
        client = Client(proc, "modern")
        client.listen("a", toolsListChanged=True)
        client.listen("b", toolsListChanged=True, promptsListChanged=True)
        assert client.tool_names() == MOCK_TOOLS
        # The change goes on the upstream session's GET stream (no relation to the call): it may
        # come before or after the result, but once per subscription.
        assert client.text("add_tool", {"via": "get"}) == "dyn_1"
        heard = proc.notifications + heard_after_marker(client, "b")
        assert sorted(json.dumps(f, sort_keys=True) for f in heard) == sorted(
            json.dumps(tagged(TOOLS_CHANGED, sub), sort_keys=True) for sub in ("a", "b")
        ), heard
        assert client.tool_names() == [*MOCK_TOOLS, "dyn_1"]
        assert client.text("dyn_1") == "dyn_1"


def test_a_change_made_by_another_client_of_the_upstream_is_relayed_once() -> None:
    with MockUpstream() as mock, gateway("--upstream", mock.url) as proc:
        client = Client(proc, "modern")
        client.listen("w", toolsListChanged=True, promptsListChanged=True)
        assert client.tool_names() == MOCK_TOOLS
        raw = RawSession(mock.url)
        assert raw.call("add_tool") == "dyn_1"  # the mock tells the gateway's session on its GET stream
        heard = heard_after_marker(client, "w")
        assert heard == [tagged(TOOLS_CHANGED, "w")], heard
        assert client.tool_names() == [*MOCK_TOOLS, "dyn_1"]
        assert client.text("dyn_1") == "dyn_1"


def test_one_change_sent_on_both_streams_is_relayed_once() -> None:
    with MockUpstream() as mock, gateway("--upstream", mock.url) as proc:
        client = Client(proc, "modern")
        client.listen("w", toolsListChanged=True, promptsListChanged=True)
        assert client.tool_names() == MOCK_TOOLS
        response = proc.request("tools/call", client.params({"name": "add_tool", "arguments": {"via": "both"}}), id="call")
        assert response["result"]["content"][0]["text"] == "dyn_1"
        heard = proc.notifications + heard_after_marker(client, "w")
        assert heard == [tagged(TOOLS_CHANGED, "w")], heard


# -- server-everything in Streamable HTTP mode ----------------------------------------------------

@pytest.fixture(scope="module")
def everything_entry(bounded: Any, repo_root: Path) -> list[str]:
    """`[node, ENTRY]` of server-everything (scripts/peers-npm installs it once, pinned)."""
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on the PATH; server-everything needs Node.js >= 18", pytrace=False)
    env = {**os.environ, "PEERS_NPM_TIMEOUT": str(NPM_INSTALL_TIMEOUT)}
    result = bounded([str(repo_root / "scripts" / "peers-npm")], timeout=PEERS_NPM_TIMEOUT, cwd=repo_root, env=env)
    if result.returncode != 0:
        pytest.fail(f"scripts/peers-npm failed with exit status {result.returncode}\n{result.stderr}", pytrace=False)
    entry = (result.stdout.strip().splitlines() or [""])[-1]
    if not (entry and Path(entry).is_file()):
        pytest.fail(f"scripts/peers-npm printed no usable entry path: {result.stdout!r}\n{result.stderr}", pytrace=False)
    return [node, entry]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def everything_http(everything_entry: list[str]) -> Iterator[str]:
    """server-everything in Streamable HTTP mode; yields `http://127.0.0.1:N/mcp`. Readiness is
    its own announcement on its output, read from a pipe (a reader thread keeps draining it)."""
    failures = []
    for _attempt in range(3):  # the free port may be taken before node binds it
        port = free_port()
        proc = subprocess.Popen(
            [*everything_entry, "streamableHttp"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PORT": str(port)},
            start_new_session=True,
        )
        lines: queue.Queue[bytes | None] = queue.Queue()
        output: list[str] = []

        def pump(stream: Any = proc.stdout, lines: queue.Queue[bytes | None] = lines) -> None:
            for line in iter(stream.readline, b""):
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            deadline = time.monotonic() + START_WAIT
            ready = False
            while not ready:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    line = lines.get(timeout=remaining)
                except queue.Empty:
                    break
                if line is None:
                    break
                output.append(line.decode("utf-8", "replace"))
                ready = EVERYTHING_READY in output[-1]
            if ready:
                yield f"http://127.0.0.1:{port}/mcp"
                return
            failures.append("".join(output))
            if "already in use" not in failures[-1]:
                break
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            assert proc.stdout is not None
            proc.stdout.close()
    pytest.fail(f"server-everything did not start in streamableHttp mode:\n{failures}", pytrace=False)


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_everything_over_http_behind_the_gateway(everything_http: str, era: str) -> None:
    with gateway("--upstream", everything_http, "--log-level", "info") as proc:
        client = Client(proc, era)
        listed = client.result("tools/list")
        names = {tool["name"] for tool in listed["tools"]}
        assert EVERYTHING_TOOLS <= names, sorted(names)
        echo = next(tool for tool in listed["tools"] if tool["name"] == "echo")
        assert echo["inputSchema"]["required"] == ["message"]
        echoed = client.call("echo", {"message": TEXT})["result"]
        assert echoed["content"] == [{"type": "text", "text": f"Echo: {TEXT}"}], echoed
        summed = client.call("get-sum", {"a": 40, "b": 2})["result"]
        assert summed["content"] == [{"type": "text", "text": "The sum of 40 and 2 is 42."}], summed
        if client.modern:
            assert echoed["resultType"] == "complete" and listed["resultType"] == "complete"
        else:
            assert "resultType" not in echoed and set(listed) <= {"tools", "nextCursor"}
        token = "tok-" + era
        done = proc.result(
            "tools/call",
            client.params({"name": "trigger-long-running-operation", "arguments": {"duration": 0.3, "steps": 3}}, progressToken=token),
        )
        assert "completed" in done["content"][0]["text"], done
        progress = [f["params"]["progress"] for f in proc.notifications if is_notification(f, "notifications/progress") and f["params"]["progressToken"] == token]
        assert progress == [1, 2, 3], proc.notifications
        assert "upstream 'upstream1' connected (handshake era)" in proc.stderr_text()
        code, _ = proc.finish()
        assert_clean_exit(proc, code)


def test_everything_over_http_through_the_client(everything_http: str) -> None:
    """`mcpsync.connect(URL)` in mode auto: server-everything refuses the server/discover probe
    (HTTP 400, -32000, id null), so the client falls back to initialize."""
    with mcpsync.connect(everything_http, timeout=30) as session:
        assert session.era is Era.HANDSHAKE
        assert session.protocol_version == HANDSHAKE_VERSION
        assert session.server_info.get("name") == EVERYTHING_NAME, session.server_info
        tools = {tool["name"]: tool for tool in session.list_tools()}
        assert EVERYTHING_TOOLS <= set(tools), sorted(tools)
        echoed = session.call_tool("echo", {"message": TEXT})
        assert echoed["content"] == [{"type": "text", "text": f"Echo: {TEXT}"}], echoed
        summed = session.call_tool("get-sum", {"a": 2, "b": 3.5})
        assert summed["content"] == [{"type": "text", "text": "The sum of 2 and 3.5 is 5.5."}], summed
        assert session.call_tool("echo", {}).get("isError") is True


# -- an HTTP upstream that goes away and comes back -----------------------------------------------

def wait_for_change(proc: ServerProcess, heard: list[dict[str, Any]], timeout: float, what: str) -> None:
    """A tools change heard already (in `heard`) or within `timeout`."""
    if not any(tools_changed(frame) for frame in heard):
        proc.expect(tools_changed, timeout=timeout, what=what)


def test_an_http_upstream_that_goes_away_is_withdrawn_and_comes_back_on_the_same_port() -> None:
    with MockUpstream() as mock, gateway("--upstream", mock.url, "--log-level", "info") as proc:
        client = Client(proc, "modern")
        client.listen("watch", toolsListChanged=True)
        assert client.tool_names() == MOCK_TOOLS
        assert client.text("echo", {"text": "before"}) == "echo: before"
        first = upstream_session(json.loads(client.text("stats")))[0]

        mock.kill()
        # A call now fails with an error that says which upstream, or which URL, is gone.
        error = client.call("echo", {"text": "gone"})["error"]
        assert "upstream 'upstream1'" in error["message"] or mock.url in error["message"], error
        heard = list(proc.notifications)
        wait_for_change(proc, heard, LOSS_WAIT, "the dead upstream's tools being withdrawn")
        assert client.tool_names() == [], "a dead upstream's tools must not be listed"
        error = client.call("echo", {"text": "gone"})["error"]  # not "Unknown tool": it is coming back
        assert error["code"] == -32603 and error["message"].startswith("upstream 'upstream1' is unavailable: it is restarting"), error
        assert "upstream 'upstream1' was lost" in proc.stderr_text()

        mock.start()  # the same port
        wait_for_change(proc, list(proc.notifications), RESTART_WAIT, "the upstream coming back")
        assert client.tool_names() == MOCK_TOOLS
        assert client.text("echo", {"text": "back"}) == "echo: back"
        second, seen = upstream_session(json.loads(client.text("stats")))
        assert second != first and seen["methods"][0] == "initialize"
        proc.signal(signal.SIGTERM)
        code = proc.wait_exit()
        assert_clean_exit(proc, code)


@pytest.mark.parametrize("get_stream", [True, False], ids=["get-stream", "get-405"])
def test_an_http_upstream_restarted_behind_the_gateways_back_gets_a_new_session(get_stream: bool) -> None:
    """The upstream dies and is back on the same port before the gateway noticed: its next request
    with the old session id (the GET stream's re-open, or a call) is answered 404, the session is
    lost, the tools are withdrawn with a change and come back with another once re-initialized."""
    with MockUpstream(*([] if get_stream else ["--no-get"])) as mock, gateway("--upstream", mock.url, "--log-level", "info") as proc:
        client = Client(proc, "modern")
        client.listen("watch", toolsListChanged=True)
        assert client.tool_names() == MOCK_TOOLS
        first = upstream_session(json.loads(client.text("stats")))[0]
        mock.kill()
        mock.start()
        heard: list[dict[str, Any]] = []
        if not get_stream:  # nothing tells the gateway until it asks
            response = client.call("echo", {"text": "x"})
            heard += proc.notifications
            if "error" in response:
                message = response["error"]["message"]
                assert "upstream 'upstream1'" in message and "session" in message, response
            else:  # only if the loss was already handled and the upstream re-initialized
                assert response["result"]["content"][0]["text"] == "echo: x"
        deadline = time.monotonic() + RESTART_WAIT
        while sum(1 for f in heard if tools_changed(f)) < 2:  # withdrawn, then back
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"expected two tool changes, heard {heard}\n{proc.stderr_tail()}"
            heard.append(proc.expect(tools_changed, timeout=remaining, what="the withdrawal and the return"))
        assert client.tool_names() == MOCK_TOOLS
        assert client.text("echo", {"text": "back"}) == "echo: back"
        second, seen = upstream_session(json.loads(client.text("stats")))
        assert second != first and seen["methods"][:1] == ["initialize"]
        assert "upstream 'upstream1' was lost" in proc.stderr_text()
        code, _ = proc.finish()
        assert_clean_exit(proc, code)


# -- the mock itself behaves like a server of its era ---------------------------------------------

def test_the_mock_checks_session_and_version_headers_like_a_real_server() -> None:
    with MockUpstream() as mock:
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        status, _, messages = http_rpc(mock.url, ping)
        assert status == 400 and messages[0]["error"]["code"] == -32000 and messages[0]["id"] is None, messages
        raw = RawSession(mock.url)
        assert http_rpc(mock.url, ping, raw.id, HANDSHAKE_VERSION)[0] == 200
        assert http_rpc(mock.url, ping, raw.id)[0] == 400, "MCP-Protocol-Version is required in a session"
        assert http_rpc(mock.url, ping, raw.id, "2025-06-18")[0] == 400, "and must be the negotiated one"
        assert http_rpc(mock.url, ping, uuid.uuid4().hex, HANDSHAKE_VERSION)[0] == 404
        status, _, messages = http_rpc(mock.url, {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": modern_meta()}}, raw.id, HANDSHAKE_VERSION)
        assert status == 200 and messages[0]["error"]["code"] == -32601, messages
        status, _, messages = http_rpc(mock.url, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "add_tool", "arguments": {}}}, raw.id, HANDSHAKE_VERSION)
        assert status == 200 and [m.get("method") or m["result"]["content"][0]["text"] for m in messages] == [TOOLS_CHANGED, "dyn_1"], messages
        request = urllib.request.Request(mock.url, headers={"Mcp-Session-Id": raw.id, "MCP-Protocol-Version": HANDSHAKE_VERSION}, method="DELETE")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        assert http_rpc(mock.url, ping, raw.id, HANDSHAKE_VERSION)[0] == 404, "a deleted session is gone"
