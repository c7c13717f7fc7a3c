"""A small raw JSON-lines client for driving a real `mcpsync serve` subprocess.

Strategy: the child gets pipes for stdin and stdout and a temporary file for stderr (so stderr can
never fill a pipe and stall the server, and every assertion can quote its tail). One reader thread
reads stdout as raw bytes, keeps every byte it saw (`raw_stdout`) and every line (`lines`), and
feeds each parsed frame into a queue. Every wait has a timeout; a timeout is an AssertionError that
quotes the stderr tail. Leaving the context manager always kills the child.

Nothing here sleeps to synchronise: tests order events with responses, progress notifications and
the fixture tools' events.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

MODERN_VERSION = "2026-07-28"
HANDSHAKE_VERSION = "2025-11-25"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

DEFAULT_TIMEOUT = 10.0

_EOF = object()


class BadLine:
    """A stdout line that is not a JSON object: the wire is corrupt."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return f"BadLine({self.raw[:200]!r})"


def serve_argv(*args: str) -> list[str]:
    """`python -m mcpsync serve ARGS...` with this interpreter."""
    return [sys.executable, "-m", "mcpsync", "serve", *args]


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def base_env(extra_pythonpath: Iterable[str] = (), **overrides: str) -> dict[str, str]:
    """The environment for a child: the repo on PYTHONPATH (mcpsync is not installed)."""
    env = dict(os.environ)
    paths = [*extra_pythonpath, str(REPO_ROOT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("PYTHONUNBUFFERED", None)  # the fd-isolation tests must see ordinary buffering
    env.update(overrides)
    return env


def spawn_http_server(*args: str, stdout: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """`mcpsync serve --http 127.0.0.1:0 ARGS...` as a child in a session of its own (so a kill
    reaches its whole group), stderr piped: it names the URL once the port is bound."""
    return subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "serve", "--http", "127.0.0.1:0", *args],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=base_env(),
        cwd=str(REPO_ROOT),
        start_new_session=True,
    )


READY = b"serving MCP over HTTP at "


def read_serving_url(proc: subprocess.Popen[bytes], within: float) -> tuple[str | None, bytes]:
    """Read a `serve --http` child's stderr until it names its URL, for at most `within` seconds:
    (the URL, or None if the child ended or said nothing in time; all of stderr read so far)."""
    assert proc.stderr is not None
    stderr = b""
    deadline = time.monotonic() + within
    while READY not in stderr or b"\n" not in stderr.split(READY, 1)[1]:
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(proc.stderr.fileno(), 4096) if ready else b""
        if not chunk:
            return None, stderr
        stderr += chunk
    return stderr.split(READY, 1)[1].split()[0].decode(), stderr


class HttpServer:
    """A server child that names its URL on stderr (`mcpsync serve --http 127.0.0.1:0`, or a
    TypeScript fixture that says the same); `.url` once it listens. Started in its own session
    (as `spawn_http_server` does), so a kill takes all of it."""

    def __init__(self, proc: subprocess.Popen[bytes], within: float = 10.0) -> None:
        import pytest  # only the tests that start such a child need it

        self.proc = proc
        self.within = within
        url, self.stderr = read_serving_url(self.proc, within)
        if url is None:
            self.stop()
            pytest.fail(f"the HTTP server did not start:\n{self.stderr.decode(errors='replace')}", pytrace=False)
        self.url = url

    def stop(self) -> str:
        """SIGTERM (SIGKILL if it lingers); all of its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, rest = self.proc.communicate(timeout=self.within)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            _, rest = self.proc.communicate(timeout=self.within)
            rest += b"\n<killed: did not exit in time after SIGTERM>"
        return (self.stderr + rest).decode(errors="replace")


def modern_meta(**extra: Any) -> dict[str, Any]:
    """The 2026-07-28 `_meta` envelope, plus any extra keys given verbatim (e.g. progressToken)."""
    meta: dict[str, Any] = {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}
    meta.update(extra)
    return meta


def era_params(modern: bool, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A copy of `params` dressed for the era: the 2026-07-28 envelope (with `meta` in it), or
    the handshake era's plain `_meta` when `meta` is given."""
    out = dict(params or {})
    if modern:
        out["_meta"] = modern_meta(**meta)
    elif meta:
        out["_meta"] = dict(meta)
    return out


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def is_response(frame: Any, request_id: Any = None) -> bool:
    if not isinstance(frame, dict) or "method" in frame or not ("result" in frame or "error" in frame):
        return False
    return request_id is None or same_id(frame.get("id"), request_id)


def same_id(a: Any, b: Any) -> bool:
    """JSON-typed id equality: 7 != "7", and True is not 1."""
    return type(a) is type(b) and a == b


def is_notification(frame: Any, method: str | None = None) -> bool:
    if not isinstance(frame, dict) or "id" in frame or "method" not in frame:
        return False
    return method is None or frame["method"] == method


class ServerProcess:
    """A server child process spoken to in raw JSON lines. Use as a context manager."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> None:
        self.argv = list(argv)
        self.env = base_env() if env is None else env
        self.cwd = str(cwd) if cwd is not None else str(REPO_ROOT)
        self.proc: subprocess.Popen[bytes] | None = None
        self.raw_stdout = bytearray()
        self.lines: list[bytes] = []
        self.notifications: list[dict[str, Any]] = []  # collected by the last request()
        self._queue: queue.Queue[Any] = queue.Queue()
        self._backlog: collections.deque[Any] = collections.deque()
        self._reader: threading.Thread | None = None
        self._stderr = tempfile.TemporaryFile()
        self._next_id = 1
        self._eof_seen = False
        self._stderr_final: str | None = None
        self._stderr_mark = 0

    # -- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> ServerProcess:
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=self.env,
            cwd=self.cwd,
            bufsize=0,
        )
        self._reader = threading.Thread(target=self._read, name="wire-reader", daemon=True)
        self._reader.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a kill that does not take
            pass
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self._reader is not None:
            self._reader.join(timeout=5)
        self._stderr_final = self.stderr_text()
        self._stderr.close()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        partial = b""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                if partial:
                    self._line(partial)
                self._queue.put(_EOF)
                return
            self.raw_stdout += chunk
            partial += chunk
            *complete, partial = partial.split(b"\n")
            for line in complete:
                self._line(line)

    def _line(self, line: bytes) -> None:
        self.lines.append(line)
        try:
            frame = json.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            frame = BadLine(line)
        if not isinstance(frame, dict):
            frame = BadLine(line)
        self._queue.put(frame)

    # -- diagnostics ------------------------------------------------------------------------------
    def stderr_text(self) -> str:
        if self._stderr_final is not None:
            return self._stderr_final
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    def mark_stderr(self) -> None:
        """Remember how much stderr there is now (see `stderr_since_mark`)."""
        self._stderr_mark = len(self.stderr_text())

    def stderr_since_mark(self) -> str:
        return self.stderr_text()[self._stderr_mark :]

    def stderr_tail(self, chars: int = 4000) -> str:
        return self.stderr_text()[-chars:]

    def _fail(self, what: str) -> AssertionError:
        status = "running" if self.proc is None or self.proc.poll() is None else f"exited {self.proc.returncode}"
        return AssertionError(f"{what} (server {status})\n--- stderr tail ---\n{self.stderr_tail()}")

    # -- writing ----------------------------------------------------------------------------------
    def send(self, message: Any) -> None:
        """Send one message (a dict/list/scalar, encoded compactly with a newline) or raw bytes/str as is."""
        if isinstance(message, str):
            data = message.encode("utf-8")
        elif isinstance(message, (bytes, bytearray)):
            data = bytes(message)
        else:
            data = encode(message)
        self.write_raw(data)

    def write_raw(self, data: bytes) -> None:
        """One os.write loop: everything in `data` goes out before anything is read back."""
        assert self.proc is not None and self.proc.stdin is not None
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def new_id(self) -> int:
        request_id = self._next_id
        self._next_id += 1
        return request_id

    def request_frame(self, method: str, params: dict[str, Any] | None = None, id: Any = None) -> dict[str, Any]:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": self.new_id() if id is None else id, "method": method}
        if params is not None:
            frame["params"] = params
        return frame

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        self.send(frame)

    def cancel(self, request_id: Any, reason: str | None = None) -> None:
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        self.notify("notifications/cancelled", params)

    def close_stdin(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signum)

    # -- reading ----------------------------------------------------------------------------------
    def recv(self, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The next frame (in arrival order). Fails on timeout, on end of output and on a non-JSON line."""
        if self._backlog:
            frame = self._backlog.popleft()
        else:
            frame = self._get(timeout, "a frame")
        return frame

    def _get(self, timeout: float, what: str) -> dict[str, Any]:
        if self._eof_seen:
            raise self._fail(f"waiting for {what}: the server's stdout is already closed")
        try:
            frame = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise self._fail(f"timed out after {timeout}s waiting for {what}") from None
        if frame is _EOF:
            self._eof_seen = True
            raise self._fail(f"waiting for {what}: the server closed its stdout")
        if isinstance(frame, BadLine):
            raise self._fail(f"the server wrote a line that is not a JSON object: {frame!r}")
        return frame

    def expect(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = DEFAULT_TIMEOUT, what: str = "a matching frame") -> dict[str, Any]:
        """The first frame (backlog first) matching `predicate`; frames skipped stay in the backlog."""
        for index, frame in enumerate(self._backlog):
            if predicate(frame):
                del self._backlog[index]
                return frame
        deadline = time.monotonic() + timeout
        skipped: list[Any] = []
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._fail(f"timed out after {timeout}s waiting for {what}; saw {skipped!r}")
                frame = self._get(remaining, what)
                if predicate(frame):
                    return frame
                skipped.append(frame)
        finally:
            self._backlog.extend(skipped)

    def response(self, request_id: Any, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The response to `request_id`; notifications seen before it go to `self.notifications`."""
        self.notifications = []
        deadline = time.monotonic() + timeout
        kept: list[Any] = []
        for frame in list(self._backlog):
            if is_response(frame, request_id):
                self._backlog.remove(frame)
                return frame
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._fail(f"timed out after {timeout}s waiting for the response to id {request_id!r}")
                frame = self._get(remaining, f"the response to id {request_id!r}")
                if is_response(frame, request_id):
                    return frame
                if is_notification(frame):
                    self.notifications.append(frame)
                else:
                    kept.append(frame)
        finally:
            self._backlog.extend(kept)

    def request(self, method: str, params: dict[str, Any] | None = None, id: Any = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Send a request and return its response (the whole frame); see `notifications`."""
        frame = self.request_frame(method, params, id)
        self.send(frame)
        return self.response(frame["id"], timeout)

    def result(self, method: str, params: dict[str, Any] | None = None, id: Any = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Like `request`, but asserts success and returns the result."""
        response = self.request(method, params, id, timeout)
        if "result" not in response:
            raise self._fail(f"{method} failed: {response!r}")
        return response["result"]

    def error(self, method: str, params: dict[str, Any] | None = None, id: Any = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Like `request`, but asserts an error and returns it."""
        response = self.request(method, params, id, timeout)
        if "error" not in response:
            raise self._fail(f"{method} unexpectedly succeeded: {response!r}")
        return response["error"]

    def ping(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Proves the server is alive and has read everything sent before (answers in order)."""
        assert self.result("ping", timeout=timeout) == {}

    # -- ending -----------------------------------------------------------------------------------
    def wait_exit(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise self._fail(f"the server did not exit within {timeout}s") from None

    def drain(self, timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
        """Every frame not yet received, up to the end of output (call after the server exited or
        after closing stdin). Non-JSON lines fail."""
        frames = list(self._backlog)
        self._backlog.clear()
        if self._eof_seen:
            return frames
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(f"timed out after {timeout}s waiting for the end of output; got {frames!r}")
            try:
                frame = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if frame is _EOF:
                self._eof_seen = True
                return frames
            if isinstance(frame, BadLine):
                raise self._fail(f"the server wrote a line that is not a JSON object: {frame!r}")
            frames.append(frame)

    def finish(self, timeout: float = DEFAULT_TIMEOUT) -> tuple[int, list[dict[str, Any]]]:
        """Close stdin, wait for exit; the exit code and every frame not yet received."""
        self.close_stdin()
        code = self.wait_exit(timeout)
        return code, self.drain(timeout)


def legacy_init(proc: ServerProcess, version: str = HANDSHAKE_VERSION, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """The handshake: initialize, then notifications/initialized. Returns the initialize result."""
    result = proc.result(
        "initialize",
        {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": {"name": "wire", "version": "0"}},
    )
    proc.notify("notifications/initialized")
    return result


class EraClient:
    """One era's way of making requests over a `ServerProcess`: handshake (after `initialize`) or
    2026-07-28 (every request enveloped). Lets one test body run in both eras."""

    def __init__(self, proc: ServerProcess, era: str, *, probe: bool = True) -> None:
        """Handshake: `initialize` now. Modern: `server/discover` now (as a dual-era client probes),
        which locks the era; with `probe=False` the connection stays unlocked until the first request."""
        assert era in ("handshake", "modern")
        self.proc = proc
        self.era = era
        self.modern = era == "modern"
        if not self.modern:
            self.init_result = legacy_init(proc)
        elif probe:
            self.discover_result = proc.result("server/discover", {"_meta": modern_meta()})

    def params(self, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        return era_params(self.modern, params, **meta)

    def request(self, method: str, params: dict[str, Any] | None = None, id: Any = None, **meta: Any) -> dict[str, Any]:
        return self.proc.request(method, self.params(params, **meta), id=id)

    def result(self, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        return self.proc.result(method, self.params(params, **meta))

    def error(self, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        return self.proc.error(method, self.params(params, **meta))

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        return self.result("tools/call", {"name": name, "arguments": arguments or {}}, **meta)


def stat_fields(pid: int) -> list[bytes] | None:
    """state, ppid, pgrp, ... of /proc/PID/stat (None once it is gone). The fields after the
    command name, which may itself hold spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def children_of(pid: int) -> list[int]:
    """Pids whose parent is `pid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        fields = stat_fields(int(entry)) if entry.isdigit() else None
        if fields is not None and len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def upstreams_of(gateway: int) -> list[int]:
    """A gateway's upstream children: its children but its watchdog (mcpsync._process_groups),
    the one that stops them should the gateway be killed."""
    def is_watchdog(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                return b"/mcpsync/_process_groups.py\0watchdog\0" in handle.read()
        except OSError:
            return False
    return [pid for pid in children_of(gateway) if not is_watchdog(pid)]


def proc_status_kb(pid: int, key: str) -> int:
    """A `kB` field of /proc/PID/status (VmHWM, VmRSS)."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def has_traceback(text: str) -> bool:
    return "Traceback (most recent call last)" in text


SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"


class GatewayClient:
    """One era's requests over a gateway process (the handshake era after `initialize`, or 2026-07-28
    after `server/discover`, every request enveloped)."""

    is_error_required = True  # a subclass may accept results that leave isError out

    def __init__(self, proc: ServerProcess, era: str) -> None:
        self.proc = proc
        self.modern = era == "modern"
        if self.modern:
            self.opened = proc.result("server/discover", {"_meta": modern_meta()})
        else:
            self.opened = legacy_init(proc)

    def params(self, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        return era_params(self.modern, params, **meta)

    def frame(self, request_id: Any, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": self.params(params, **meta)}

    def call_frame(self, request_id: Any, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        return self.frame(request_id, "tools/call", {"name": name, "arguments": arguments or {}}, **meta)

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.proc.result(method, self.params(params))

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.proc.request("tools/call", self.params({"name": name, "arguments": arguments or {}}))

    def text(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        response = self.call(name, arguments)
        assert "result" in response, response
        if self.is_error_required:
            assert response["result"]["isError"] is False, response
        else:  # isError is optional on the wire: absent means False
            assert response["result"].get("isError") in (None, False), response
        [block] = response["result"]["content"]
        return block["text"]

    def tool_names(self) -> list[str]:
        return [tool["name"] for tool in self.result("tools/list")["tools"]]

    def listen(self, request_id: Any, **notifications: bool) -> dict[str, Any]:
        self.proc.send(self.frame(request_id, "subscriptions/listen", {"notifications": notifications}))
        ack = self.proc.expect(lambda f: is_notification(f, "notifications/subscriptions/acknowledged"), what="the listen acknowledgement")
        assert same_id(ack["params"]["_meta"][SUBSCRIPTION_ID], request_id), ack
        return ack


def tools_changed(frame: dict[str, Any]) -> bool:
    return is_notification(frame, TOOLS_CHANGED)
