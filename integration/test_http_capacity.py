"""`mcpsync serve --http` under load it must shrug off (issue 13): slow clients and many streams.

Both tests run `python -m mcpsync serve --http 127.0.0.1:0 integration/dynamic_app.py` as a child
(its stderr drained by a thread of ours, the URL read from it) and talk raw HTTP on non-blocking
sockets driven by one selector, not a thread per connection.

- slowloris: 200 connections dribble a request head, one byte a second, and 200 send nothing; they
  are held open (under the server's 10 s `timeout`) while a normal client's 2026-07-28 `tools/list`
  is served, each in under 1 s, repeatedly for about 5 s. Slow clients cost a descriptor, not a
  thread: the server's thread count stays within --threads plus a few.
- streams: 2,000 open 2026-07-28 `subscriptions/listen` streams on one process (RLIMIT_NOFILE of
  this process raised to its hard limit; the server raises its own, per the contract), one tools
  list change (`add_tool`) reaches every one of them, tagged with its own subscription id, a normal
  request is still served, and the thread count stays within --threads plus a few.

--workers (the engine's threads for tool calls) is kept small so that the bound on the process's
threads measures the HTTP server's.
"""

from __future__ import annotations

import http.client
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from wire import has_traceback, modern_meta, spawn_http_server

pytestmark = pytest.mark.timeout(240)

LONG = 20.0 if os.environ.get("CI") else 10.0
APP = Path(__file__).with_name("dynamic_app.py")
MODERN = "2026-07-28"
THREADS = 16
WORKERS = 4
THREAD_SLACK = 8  # the process's own threads besides the HTTP server's: main, engine, signals...


# -- the server process -----------------------------------------------------------------------------

class Served:
    """`mcpsync serve --http 127.0.0.1:0 ARGS...` as a child, its stderr drained by a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = spawn_http_server(*args)
        self._stderr = bytearray()
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._drain, name="test-stderr-drain", daemon=True)
        self._reader.start()
        if not self._listening.wait(LONG) or b"serving MCP over HTTP at " not in self.stderr:
            self.kill()
            pytest.fail(f"the server did not start:\n{self.stderr.decode(errors='replace')}", pytrace=False)
        url = self.stderr.split(b"serving MCP over HTTP at ", 1)[1].split()[0].decode()
        self.host, port_path = url.split("//", 1)[1].split(":", 1)
        self.port = int(port_path.split("/", 1)[0])
        self.path = "/" + port_path.split("/", 1)[1]

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        while chunk := os.read(fd, 65536):
            with self._lock:
                self._stderr += chunk
                if b"serving MCP over HTTP at " in self._stderr and b"\n" in self._stderr.split(b"serving MCP over HTTP at ", 1)[1]:
                    self._listening.set()
        self._listening.set()

    @property
    def stderr(self) -> bytes:
        with self._lock:
            return bytes(self._stderr)

    def threads(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as handle:
            for line in handle:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        raise AssertionError("no Threads: line in /proc/PID/status")

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(LONG)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the server did not exit within {LONG} s of SIGTERM:\n{self.stderr.decode(errors='replace')[-4000:]}", pytrace=False)
        self._reader.join(LONG)
        return self.proc.returncode, self.stderr.decode(errors="replace")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(LONG)
        self._reader.join(LONG)

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def open_files() -> Iterator[int]:
    """RLIMIT_NOFILE of this process raised to its hard limit for the test; restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- requests ---------------------------------------------------------------------------------------

def modern_bytes(served: Served, method: str, params: dict[str, Any], request_id: Any, *, name: str | None = None) -> bytes:
    """A whole 2026-07-28 POST, its routing headers included, as raw bytes."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": modern_meta(), **params}}).encode()
    head = (
        f"POST {served.path} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\nMcp-Method: {method}\r\n"
        + (f"Mcp-Name: {name}\r\n" if name else "")
        + f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def normal_request(served: Served, method: str, params: dict[str, Any] | None = None, *, name: str | None = None) -> tuple[float, dict[str, Any]]:
    """One request on a new connection, as an ordinary client makes it: (seconds taken, the JSON answer)."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=LONG)
    try:
        data = modern_bytes(served, method, params or {}, 1, name=name)
        head, body = data.split(b"\r\n\r\n", 1)
        headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
        headers.pop("Host")
        conn.request("POST", served.path, body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        assert response.status == 200, (response.status, raw[:500])
        if response.getheader("Content-Type", "").startswith("text/event-stream"):
            messages = [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ") and line[6:].strip()]
            answer = next(m for m in messages if m.get("id") == 1)
        else:
            answer = json.loads(raw)
    finally:
        conn.close()
    return time.monotonic() - started, answer


# -- a) slowloris -----------------------------------------------------------------------------------

class SlowClients:
    """`dribblers` connections that send a request head one byte per second, and `silent` ones that
    send nothing, all driven by one selector on one thread; it notes any the server closes."""

    def __init__(self, served: Served, dribblers: int, silent: int) -> None:
        self.head = (f"POST {served.path} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nX-Slow: " + "s" * 200 + "\r\n\r\n").encode()
        self.selector = selectors.DefaultSelector()
        self.dribbling: dict[socket.socket, int] = {}
        self.silent: list[socket.socket] = []
        self.closed: list[tuple[str, bytes]] = []  # (kind, what came before the close)
        self.sent_bytes = 0
        for kind, count in (("dribble", dribblers), ("silent", silent)):
            for _ in range(count):
                sock = socket.create_connection(("127.0.0.1", served.port), timeout=LONG)
                sock.setblocking(False)
                self.selector.register(sock, selectors.EVENT_READ, kind)
                if kind == "dribble":
                    self.dribbling[sock] = 0
                else:
                    self.silent.append(sock)
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="test-slowloris")

    def _run(self) -> None:
        try:
            next_tick = time.monotonic()
            while not self.stop.is_set():
                now = time.monotonic()
                if now >= next_tick:
                    for sock, at in list(self.dribbling.items()):
                        if at < len(self.head):
                            try:
                                sock.send(self.head[at:at + 1])
                            except OSError as exc:
                                self._closed(sock, "dribble", f"send: {exc!r}".encode())
                                continue
                            self.dribbling[sock] = at + 1
                            self.sent_bytes += 1
                    next_tick = now + 1.0
                for key, _ in self.selector.select(timeout=max(0.0, min(0.2, next_tick - time.monotonic()))):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data = sock.recv(65536)
                    except OSError as exc:
                        data = f"recv: {exc!r}".encode()
                    self._closed(sock, key.data, data or b"<eof>")
        except BaseException as exc:  # noqa: BLE001 -- reported by the test
            self.failure = exc

    def _closed(self, sock: socket.socket, kind: str, what: bytes) -> None:
        self.closed.append((kind, what[:300]))
        self.selector.unregister(sock)
        self.dribbling.pop(sock, None)
        sock.close()

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(LONG)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()


def test_slowloris_does_not_starve_a_normal_client() -> None:
    with Served(str(APP), "--threads", str(THREADS), "--workers", str(WORKERS)) as served:
        slow = SlowClients(served, dribblers=200, silent=200)
        try:
            slow.thread.start()
            latencies: list[float] = []
            most_threads = served.threads()
            started = time.monotonic()
            while time.monotonic() - started < 5.0:
                took, answer = normal_request(served, "tools/list")
                assert "add_tool" in {tool["name"] for tool in answer["result"]["tools"]}, answer
                latencies.append(took)
                most_threads = max(most_threads, served.threads())
            assert slow.failure is None, repr(slow.failure)
            assert slow.sent_bytes >= 200 * 4, f"the slow clients sent only {slow.sent_bytes} bytes"
            assert not slow.closed, f"{len(slow.closed)} slow connections were closed within 5 s (timeout is 10 s): {slow.closed[:5]}"
        finally:
            slow.close()
        assert len(latencies) >= 5 and max(latencies) < 1.0, (
            f"{len(latencies)} tools/list served, slowest {max(latencies):.3f} s: {[round(t, 3) for t in latencies]}")
        assert most_threads <= THREADS + THREAD_SLACK, f"{most_threads} threads with 400 slow clients (--threads {THREADS})"
        status, stderr = served.stop()
    assert status == 0, stderr[-4000:]
    assert not has_traceback(stderr), stderr[-4000:]


# -- b) 2,000 listens -------------------------------------------------------------------------------

STREAMS = 2000


class Listen:
    """One `subscriptions/listen` stream: its socket, and its response parsed as it comes."""

    def __init__(self, index: int, sock: socket.socket, request: bytes) -> None:
        self.index = index
        self.id = f"L{index}"
        self.sock = sock
        self.out = request
        self.raw = bytearray()
        self.head: bytes | None = None
        self.chunked = False
        self.sse = bytearray()
        self.messages: list[dict[str, Any]] = []
        self.ended: str | None = None

    def feed(self, data: bytes) -> None:
        self.raw += data
        if self.head is None:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return
            self.head = bytes(self.raw[:end])
            del self.raw[:end + 4]
            status = self.head.split(b"\r\n", 1)[0].split(b" ")
            if len(status) < 2 or status[1] != b"200" or b"text/event-stream" not in self.head.lower():
                self.ended = f"answered {self.head[:300]!r} {bytes(self.raw[:200])!r}"
                return
            self.chunked = b"transfer-encoding: chunked" in self.head.lower()
        if self.chunked:
            while True:
                line_end = self.raw.find(b"\r\n")
                if line_end < 0:
                    break
                size = int(bytes(self.raw[:line_end]).split(b";")[0], 16)
                if len(self.raw) < line_end + 2 + size + 2:
                    break
                self.sse += self.raw[line_end + 2:line_end + 2 + size]
                del self.raw[:line_end + 2 + size + 2]
                if size == 0:
                    self.ended = "the stream ended"
        else:
            self.sse += self.raw
            self.raw.clear()
        while (end := self.sse.find(b"\n\n")) >= 0:
            event = bytes(self.sse[:end])
            del self.sse[:end + 2]
            for line in event.split(b"\n"):
                if line.startswith(b"data: ") and line[6:].strip():  # a priming event's data is empty
                    self.messages.append(json.loads(line[6:]))

    def has(self, method: str) -> bool:
        return any(m.get("method") == method for m in self.messages)


def pump(selector: selectors.BaseSelector, listens: list[Listen], until: Any, what: str, served: Served, deadline_s: float) -> int:
    """Drive every socket (send what is left, read what comes) until `until()`; the most threads seen."""
    deadline = time.monotonic() + deadline_s
    most = served.threads()
    last_sample = time.monotonic()
    while not until():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            ended = [f"{item.id}: {item.ended}" for item in listens if item.ended][:5]
            raise AssertionError(f"{what}: not within {deadline_s} s; streams that ended: {ended}")
        for key, events in selector.select(timeout=min(remaining, 0.5)):
            item: Listen = key.data
            if events & selectors.EVENT_WRITE and item.out:
                try:
                    sent = item.sock.send(item.out)
                except BlockingIOError:
                    sent = 0
                except OSError as exc:
                    item.ended = f"send failed: {exc!r}"
                    selector.unregister(item.sock)
                    continue
                item.out = item.out[sent:]
                if not item.out:
                    selector.modify(item.sock, selectors.EVENT_READ, item)
            if events & selectors.EVENT_READ:
                try:
                    data = item.sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:
                    data, item.ended = b"", f"recv failed: {exc!r}"
                if not data:
                    item.ended = item.ended or "closed by the server"
                    selector.unregister(item.sock)
                    continue
                item.feed(data)
        if time.monotonic() - last_sample > 0.25:
            most, last_sample = max(most, served.threads()), time.monotonic()
        broken = [item for item in listens if item.ended]
        assert not broken, f"{what}: {len(broken)} streams ended, e.g. {broken[0].id}: {broken[0].ended}"
    return max(most, served.threads())


def test_two_thousand_listens_on_one_process_all_get_one_change(open_files: int) -> None:
    assert open_files >= STREAMS + 500, f"the hard RLIMIT_NOFILE ({open_files}) is too low for {STREAMS} streams"
    selector = selectors.DefaultSelector()
    listens: list[Listen] = []
    with Served(str(APP), "--threads", str(THREADS), "--workers", str(WORKERS),
                "--max-streams", "2500", "--max-connections", "3000") as served:
        try:
            # connect in batches (the listen backlog is finite), non-blocking, one selector for all
            for batch in range(0, STREAMS, 100):
                for index in range(batch, min(batch + 100, STREAMS)):
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    sock.setblocking(False)
                    sock.connect_ex(("127.0.0.1", served.port))
                    request = modern_bytes(served, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, f"L{index}")
                    item = Listen(index, sock, request)
                    listens.append(item)
                    selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, item)
                opened = listens[:]
                pump(selector, listens, lambda opened=opened: all(not i.out for i in opened), f"sending listens up to {len(opened)}", served, 4 * LONG)
            most = pump(selector, listens, lambda: all(i.has("notifications/subscriptions/acknowledged") for i in listens),
                        f"{STREAMS} acknowledgements", served, 6 * LONG)
            acked = [i for i in listens if i.has("notifications/subscriptions/acknowledged")]
            assert len(acked) == STREAMS
            assert most <= THREADS + THREAD_SLACK, f"{most} threads with {STREAMS} open listens (--threads {THREADS})"

            took, answer = normal_request(served, "tools/list")
            assert "add_tool" in {tool["name"] for tool in answer["result"]["tools"]} and took < LONG / 2, (took, answer)

            took, answer = normal_request(served, "tools/call", {"name": "add_tool", "arguments": {}}, name="add_tool")
            added = answer["result"]["content"][0]["text"]
            assert added.startswith("dyn_"), answer

            most = max(most, pump(selector, listens, lambda: all(i.has("notifications/tools/list_changed") for i in listens),
                                  f"the change reaching all {STREAMS} listens", served, 6 * LONG))
            for item in listens:
                changes = [m for m in item.messages if m.get("method") == "notifications/tools/list_changed"]
                assert len(changes) == 1, (item.id, item.messages)
                assert changes[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == item.id, (item.id, changes[0])
            assert most <= THREADS + THREAD_SLACK, f"{most} threads with {STREAMS} open listens (--threads {THREADS})"

            took, answer = normal_request(served, "tools/list")  # still served, the streams still open
            assert added in {tool["name"] for tool in answer["result"]["tools"]} and took < LONG / 2, (took, answer)
        finally:
            for item in listens:
                try:
                    selector.unregister(item.sock)
                except (KeyError, ValueError):
                    pass
                item.sock.close()
            selector.close()
        status, stderr = served.stop()
    assert status == 0, stderr[-4000:]
    assert not has_traceback(stderr), stderr[-4000:]
