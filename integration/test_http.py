"""mcpsync over Streamable HTTP, on real sockets on 127.0.0.1.

Servers run either as `python -m mcpsync serve --http 127.0.0.1:0 ...` subprocesses (the URL is
read from stderr) or in this process through `Server.start_http()` (mcpsync's HTTP server on a background
thread), when a test needs to see what a tool saw. Clients: mcpsync's own (`mcpsync.connect(url)`),
raw `http.client` for what a client library would hide (headers, the SSE bytes, hanging up), and
the official Python SDK (`sdk_http_driver.py`, in the peers venv).
"""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest
from wire import FIXTURES, REPO_ROOT, base_env, has_traceback, modern_meta, read_serving_url, spawn_http_server

import mcpsync
from mcpsync import Context, Server, Service

pytestmark = pytest.mark.timeout(60)

LONG = 20.0 if os.environ.get("CI") else 10.0
APP = FIXTURES / "http_app.py"
STUBBORN_APP = FIXTURES / "stubborn_app.py"
DRIVER = Path(__file__).with_name("sdk_http_driver.py")
MODERN = "2026-07-28"


# -- helpers ----------------------------------------------------------------------------------------

class HttpServerProcess:
    """`mcpsync serve --http 127.0.0.1:0 ARGS...` as a child; `.url` once it listens."""

    def __init__(self, *args: str) -> None:
        self.proc = spawn_http_server(*args, stdout=subprocess.PIPE)
        url, self.stderr = read_serving_url(self.proc, LONG)
        if url is None:
            self.kill()
            pytest.fail(f"the server did not start:\n{self.stderr.decode(errors='replace')}", pytrace=False)
        self.url = url

    def wait_for_stderr(self, marker: bytes) -> None:
        """Read stderr until `marker` appears in it (within LONG): a tool's sign that it runs."""
        deadline = time.monotonic() + LONG
        while marker not in self.stderr:
            ready, _, _ = select.select([self.proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.proc.stderr.fileno(), 4096) if ready else b""
            if not chunk:
                pytest.fail(f"no {marker!r} on stderr within LONG:\n{self.stderr.decode(errors='replace')}", pytrace=False)
            self.stderr += chunk

    def stop(self) -> tuple[int, str]:
        """SIGTERM, then the exit status and all of stderr (the child must exit within LONG)."""
        self.proc.send_signal(signal.SIGTERM)
        return self.exited()

    def exited(self) -> tuple[int, str]:
        """The exit status and all of stderr, once the child exits by itself (within LONG)."""
        try:
            _, rest = self.proc.communicate(timeout=LONG)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("the server did not exit within LONG after SIGTERM", pytrace=False)
        return self.proc.returncode, (self.stderr + rest).decode(errors="replace")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.communicate(timeout=LONG)

    def __enter__(self) -> "HttpServerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.kill()


def modern_post(url: str, method: str, params: dict[str, Any] | None = None, *, id: Any = 1, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    """POST one 2026-07-28 request with its routing headers; returns the open response."""
    params = {"_meta": modern_meta(), **(params or {})}
    routing = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if "name" in params:
        routing["Mcp-Name"] = params["name"]
    return post(url, {"jsonrpc": "2.0", "id": id, "method": method, "params": params}, {**routing, **(headers or {})})


def post(url: str, body: Any, headers: dict[str, str]) -> http.client.HTTPResponse:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    data = json.dumps(body).encode()
    conn.request("POST", parts.path, body=data, headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    sock = conn.sock
    response = conn.getresponse()
    response.socket = sock  # type: ignore[attr-defined]  # for hang_up()
    return response


def send_post(url: str, body: Any, headers: dict[str, str]) -> http.client.HTTPConnection:
    """POST without waiting for the response: `getresponse()` on the connection returned."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    conn.request("POST", parts.path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    return conn


def call_request(url: str, era: str, request_id: Any, name: str, **meta: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of a `tools/call` in `era`; a handshake session is initialized first."""
    params: dict[str, Any] = {"name": name, "arguments": {}}
    if era == "modern":
        params["_meta"] = modern_meta(**meta)
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    else:
        params["_meta"] = meta
        headers = handshake_headers(url)
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}, headers


def handshake_headers(url: str) -> dict[str, str]:
    """`initialize` and `notifications/initialized`: the headers of the session's later requests."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    response = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, {})
    assert response.status == 200, response.read()
    response.read()
    headers = {"Mcp-Session-Id": response.getheader("Mcp-Session-Id"), "MCP-Protocol-Version": "2025-11-25"}
    initialized = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    assert initialized.status == 202
    return headers


def sse_messages(response: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an event stream as they arrive (comments skipped)."""
    while True:
        line = response.readline()
        if not line:
            return
        if line.startswith(b"data: ") and line[6:].strip():  # a priming event's data is empty
            yield json.loads(line[6:])


def hang_up(response: http.client.HTTPResponse) -> None:
    """Close the connection under a response, the way a client that goes away does."""
    response.socket.shutdown(socket.SHUT_RDWR)  # type: ignore[attr-defined]
    response.close()


@pytest.fixture
def served() -> Iterator[tuple[Server, Service, Any]]:
    """An in-process server on an ephemeral port, with short keep-alives; shut down afterwards."""
    service = Service("inproc")

    @service.tool
    def echo(text: str) -> str:
        return text

    server = Server("inproc", services=[service], shutdown_timeout=LONG)
    serving = server.start_http("127.0.0.1", 0, keepalive=0.1, threads=16)
    yield server, service, serving
    assert server.close(LONG)


# -- the command line ----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_cli_serves_both_eras_streams_progress_and_stops_on_sigterm(mode: str) -> None:
    with HttpServerProcess(str(APP)) as server:
        with mcpsync.connect(server.url, mode=mode, timeout=LONG) as session:
            assert session.era.value == ("modern" if mode == "modern" else "handshake")
            assert {"echo", "countdown", "add_tool"} <= {tool["name"] for tool in session.list_tools()}
            assert session.call_tool("echo", {"text": "hi"})["content"][0]["text"] == "hi"
            progress: list[float] = []
            result = session.call_tool("countdown", {"steps": 3, "delay": 0.02}, progress=lambda done, total, message: progress.append(done))
            assert result["content"][0]["text"] == "counted down 3 steps"
            assert progress == [1, 2, 3]  # each arrived on the request's SSE stream before the result
        status, stderr = server.stop()
    assert status == 0, stderr
    assert not has_traceback(stderr), stderr


SHUTTING_DOWN = {"code": -32603, "message": "the server is shutting down"}


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_sigterm_answers_an_inline_tool_that_outlives_the_shutdown_deadline(era: str) -> None:
    """A tool without a Context runs on the connection's thread, which it does not give back: the
    answer still comes, in JSON, before the server exits (stubborn_app's shutdown_timeout: 0.5 s)."""
    with HttpServerProcess(str(STUBBORN_APP)) as server:
        body, headers = call_request(server.url, era, "inline", "stubborn_inline")
        conn = send_post(server.url, body, headers)
        server.wait_for_stderr(b"STUBBORN-INLINE-STARTED")
        server.proc.send_signal(signal.SIGTERM)
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type") == "application/json"
        assert json.loads(response.read()) == {"jsonrpc": "2.0", "id": "inline", "error": SHUTTING_DOWN}
        assert response.read() == b""  # and the connection ends with it
        status, stderr = server.exited()
    assert status == 0, stderr
    assert not has_traceback(stderr), stderr


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_sigterm_ends_a_stream_under_way_with_the_answer(era: str) -> None:
    """A tool with a Context that ignores cancellation, its response already an event stream (its
    progress went out): the stream's last event is the answer."""
    with HttpServerProcess(str(STUBBORN_APP)) as server:
        body, headers = call_request(server.url, era, 7, "stubborn", progressToken="p")
        response = send_post(server.url, body, headers).getresponse()
        assert response.getheader("Content-Type") == "text/event-stream"
        messages = sse_messages(response)
        assert next(messages)["method"] == "notifications/progress"
        server.wait_for_stderr(b"STUBBORN-STARTED")
        server.proc.send_signal(signal.SIGTERM)
        assert list(messages) == [{"jsonrpc": "2.0", "id": 7, "error": SHUTTING_DOWN}]
        status, stderr = server.exited()
    assert status == 0, stderr
    assert not has_traceback(stderr), stderr


def test_listen_over_sse_receives_a_change_made_by_another_request() -> None:
    with HttpServerProcess(str(APP)) as server:
        response = modern_post(server.url, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id="L1")
        assert response.status == 200
        assert response.getheader("Content-Type") == "text/event-stream"
        assert response.getheader("X-Accel-Buffering") == "no"
        messages = sse_messages(response)
        ack = next(messages)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "L1"}
        with mcpsync.connect(server.url, mode="modern", timeout=LONG) as other:
            added = other.call_tool("add_tool")["content"][0]["text"]
        change = next(messages)
        assert change == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "L1"}},
        }
        hang_up(response)
        with mcpsync.connect(server.url, mode="legacy", timeout=LONG) as legacy:
            assert added in {tool["name"] for tool in legacy.list_tools()}
            with legacy.listen(tools=True) as listener:  # the session's GET stream
                with mcpsync.connect(server.url, mode="modern", timeout=LONG) as other:
                    other.call_tool("add_tool")
                assert listener.next_event(LONG) == mcpsync.ListChanged("tools")
        status, stderr = server.stop()
    assert status == 0 and not has_traceback(stderr), stderr


@pytest.mark.parametrize("mode", ["legacy", "modern", "pinned"])
def test_the_official_sdk_client_over_http(mode: str, peers_python: str, bounded: Any) -> None:
    with HttpServerProcess(str(APP)) as server:
        result = bounded([peers_python, str(DRIVER), "--mode", mode, server.url], timeout=60.0, cwd=REPO_ROOT)
        status, stderr = server.stop()
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["era"] == ("handshake" if mode == "legacy" else "modern")
    assert {"echo", "countdown", "add_tool", "region_weather"} <= set(summary["tools"])
    assert summary["echo"] == "hi"
    assert summary["countdown"] == "counted down 3 steps" and summary["progress"] == [1, 2, 3]
    assert summary["region"] == "sunny in Nordland"  # its Mcp-Param-Region header was checked and matched
    if mode == "legacy":
        assert summary["change"] == {"method": "notifications/tools/list_changed", "tagged": False}
    else:
        assert summary["listen"]["honored"] == {"toolsListChanged": True}
        assert summary["listen"]["event"] == "ToolsListChanged"
    assert status == 0 and not has_traceback(stderr), stderr


def test_the_same_app_under_gunicorn_with_several_workers() -> None:
    """2026-07-28 requests are stateless, so any worker process serves any of them, and CORS is
    answered there as under mcpsync's own server. (A short keep-alive: gunicorn's graceful stop
    waits for open streams, and a closed listen is noticed at the next keep-alive comment.)"""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--chdir", str(FIXTURES), "-k", "gthread", "--workers", "2", "--threads", "8",
         "--bind", "127.0.0.1:0", "--graceful-timeout", "5",
         "http_app:wsgi(keepalive=0.2, allowed_origins=['https://app.example.com'])"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=base_env(), start_new_session=True,
    )
    log = b""
    try:
        deadline = time.monotonic() + LONG
        while log.count(b"Booting worker") < 2 or b"Listening at: " not in log:
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(proc.stderr.fileno(), 4096) if ready else b""
            assert chunk, f"gunicorn did not start:\n{log.decode(errors='replace')}"
            log += chunk
        url = log.split(b"Listening at: ", 1)[1].split()[0].decode() + "/mcp"
        with mcpsync.connect(url, mode="modern", timeout=LONG) as session:
            answers = [session.call_tool("echo", {"text": str(n)})["content"][0]["text"] for n in range(8)]
            assert answers == [str(n) for n in range(8)]
            progress: list[float] = []
            session.call_tool("countdown", {"steps": 3, "delay": 0.02}, progress=lambda done, total, message: progress.append(done))
            assert progress == [1, 2, 3]
            with session.listen(tools=True) as listener:
                assert listener.accepted == {"toolsListChanged": True, "promptsListChanged": True}
        parts = urlsplit(url)
        browser = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
        browser.request("OPTIONS", "/mcp", headers={"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST",
                                                    "Access-Control-Request-Headers": "content-type, mcp-method"})
        preflight = browser.getresponse()
        preflight.read()
        assert (preflight.status, preflight.getheader("Access-Control-Allow-Origin")) == (204, "https://app.example.com")
        assert preflight.getheader("Access-Control-Allow-Headers") == "content-type, mcp-method"
        browser.close()
        answer = modern_post(url, "tools/list", headers={"Origin": "https://app.example.com"})
        answer.read()
        assert (answer.status, answer.getheader("Access-Control-Allow-Origin")) == (200, "https://app.example.com")
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=LONG)
        log += rest
        assert proc.returncode == 0, log.decode(errors="replace")
        assert not has_traceback(log.decode(errors="replace")), log.decode(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=LONG)


# -- in process: what the server saw ------------------------------------------------------------------

def test_a_client_hanging_up_mid_stream_cancels_the_request_and_frees_the_stream(served: Any) -> None:
    server, service, serving = served
    started, cancelled = threading.Event(), threading.Event()

    @service.tool
    def hold(ctx: Context) -> str:
        ctx.on_cancel(cancelled.set)
        ctx.progress(1, message="started")
        started.set()
        return "cancelled" if ctx.wait_cancelled(LONG) else "not cancelled"

    closed = threading.Event()
    requests = serving.app._requests  # the endpoint's part that runs and answers a request
    original = requests._stream_closed

    def stream_closed(exchange: Any, completed: bool, *more: Any) -> None:
        original(exchange, completed, *more)
        closed.set()

    requests._stream_closed = stream_closed
    response = modern_post(serving.url, "tools/call", {"name": "hold", "_meta": modern_meta(progressToken="t")})
    assert response.getheader("Content-Type") == "text/event-stream"
    assert next(sse_messages(response))["method"] == "notifications/progress"
    assert started.is_set()
    hang_up(response)
    assert cancelled.wait(LONG), "closing the stream did not cancel the request"
    assert closed.wait(LONG), "the server did not notice the client went away"
    closed.clear()
    listen = modern_post(serving.url, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    assert next(sse_messages(listen))["method"] == "notifications/subscriptions/acknowledged"
    hang_up(listen)
    assert closed.wait(LONG), "the server did not notice the listener went away"
    assert not serving.app._listens._open and serving.app._state.streams == 0
    with mcpsync.connect(serving.url, mode="modern", timeout=LONG) as session:  # still serving
        assert session.call_tool("echo", {"text": "after"})["content"][0]["text"] == "after"


def test_two_clients_at_once_in_both_eras(served: Any) -> None:
    server, service, serving = served
    meeting = threading.Barrier(2, timeout=LONG)

    @service.tool
    def meet(who: str) -> str:
        meeting.wait()  # only returns when both calls are running at the same time
        return f"met {who}"

    answers: dict[str, str] = {}
    failures: list[BaseException] = []

    def client(mode: str) -> None:
        try:
            with mcpsync.connect(serving.url, mode=mode, timeout=LONG) as session:
                answers[mode] = session.call_tool("meet", {"who": mode})["content"][0]["text"]
        except BaseException as exc:  # noqa: BLE001 -- reported below
            failures.append(exc)

    threads = [threading.Thread(target=client, args=(mode,)) for mode in ("modern", "legacy")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG * 2)
    assert not failures, failures
    assert answers == {"modern": "met modern", "legacy": "met legacy"}


def test_shutdown_completes_an_open_listen(served: Any) -> None:
    server, service, serving = served
    response = modern_post(serving.url, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=9)
    messages = sse_messages(response)
    assert next(messages)["method"] == "notifications/subscriptions/acknowledged"
    stopper = threading.Thread(target=server.shutdown, args=(LONG,))
    stopper.start()
    final = next(messages)
    assert final["id"] == 9 and final["result"]["resultType"] == "complete"
    assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 9
    assert list(messages) == []  # then the stream ends
    stopper.join(LONG)
    assert serving.wait(0)
    assert server._live_transports() == ()  # a stopped transport is no longer published to


def test_dns_rebinding_is_refused_and_allowed_hosts_are_let_in() -> None:
    server = Server("hosts", services=[Service("empty")])
    serving = server.start_http("127.0.0.1", 0, threads=4, allowed_hosts=["mcp.example.com"])
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta()}}
        routing = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"}
        for headers, status in [
            ({"Host": "evil.example.com", "Origin": "http://evil.example.com"}, 403),
            ({"Origin": "http://evil.example.com"}, 403),
            ({"Host": "mcp.example.com"}, 200),
            ({}, 200),
        ]:
            response = post(serving.url, body, {**routing, **headers})
            assert response.status == status, headers
            assert json.loads(response.read())["jsonrpc"] == "2.0"  # a JSON-RPC body either way
    finally:
        assert server.close(LONG)


def test_mounted_beside_another_wsgi_app_with_a_body_limit() -> None:
    def website(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello from the other app"]

    server = Server("mounted", services=[Service("empty")], max_frame_bytes=2048)
    serving = server.start_http("127.0.0.1", 0, threads=4, fallback=website)
    try:
        parts = urlsplit(serving.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
        conn.request("GET", "/")
        page = conn.getresponse()
        assert page.status == 200 and page.read() == b"hello from the other app"
        too_big = post(serving.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 4096}}, {})
        assert too_big.status == 413
        with mcpsync.connect(serving.url, mode="modern", timeout=LONG) as session:
            assert session.list_tools() == []
    finally:
        assert server.close(LONG)


# -- the client's Mcp-Param-* headers ----------------------------------------------------------------

REGION_SCHEMA = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "note": {"type": "string"}},
    "additionalProperties": False,
}


def test_the_client_mirrors_annotated_arguments_into_headers_learning_them_when_refused() -> None:
    """A 2026-07-28 tools/call repeats each `x-mcp-header` argument as `Mcp-Param-<Token>`, which
    the server checks (-32020). The client learns which from tools/list; one that calls before
    listing is refused once, lists, and retries, so the script just sees the result."""
    service = Service("regions")

    @service.tool(input_schema=REGION_SCHEMA)
    def forecast(region: str = "nowhere", note: str = "") -> str:
        return f"sunny in {region}"

    server = Server("regions", services=[service], shutdown_timeout=LONG)
    serving = server.start_http("127.0.0.1", 0, keepalive=0.1, threads=8)
    try:
        with mcpsync.connect(serving.url, mode="modern", timeout=LONG) as session:  # has not listed
            assert session.call_tool("forecast", {"region": "Île-de-France"})["content"][0]["text"] == "sunny in Île-de-France"
        with mcpsync.connect(serving.url, mode="modern", timeout=LONG) as session:
            assert [tool["name"] for tool in session.list_tools()] == ["forecast"]
            assert session.call_tool("forecast", {"region": "north", "note": "x"})["content"][0]["text"] == "sunny in north"
            assert session.call_tool("forecast", {})["content"][0]["text"] == "sunny in nowhere"  # absent: no header
    finally:
        assert server.close(LONG)
