"""A client that stops reading the server's output cannot hang `mcpsync serve` (stdio).

Each test starts a real `mcpsync serve integration/fixtures/unread_app.py` with pipes and plays a
client that writes its requests and then does not read: 39 answers of 60 KB fill the pipe (the
client's end holds 64 KiB), so the server has answers it cannot write. What a user would see is
then checked from outside: the process ends on SIGTERM, on end of input, or by itself once the
client has read nothing for `--write-timeout`, each within its deadline plus a margin; and a client
that does read, however late, gets every frame once and in order.

When every answer exists is read from the fixture's `BULK n` lines on stderr: no sleep orders
anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

import pytest

from tests._timeouts import LONG
from wire import HANDSHAKE_VERSION, base_env, encode, fixture, modern_meta, serve_argv

pytestmark = pytest.mark.timeout(120)

CALLS = 39
ANSWER_BYTES = 60_000
SHUTDOWN_TIMEOUT = 1.0  # the fixture's Server(shutdown_timeout=...)
MARGIN = 15.0  # a busy machine's start-up and exit, on top of the server's own deadline


class Unread:
    """A `mcpsync serve` child whose output this test reads only when it says so."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            serve_argv(fixture("unread_app.py"), *args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=base_env(),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self._lines: list[str] = []
        self._said = threading.Condition()
        self._stderr = threading.Thread(target=self._read_stderr, args=(self.proc.stderr,), name="unread-stderr", daemon=True)
        self._stderr.start()

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            with self._said:
                self._lines.append(raw.decode("utf-8", "replace"))
                self._said.notify_all()
        with self._said:
            self._lines.append("")  # end of stderr: the server has exited
            self._said.notify_all()

    def send(self, *messages: dict[str, Any]) -> None:
        self.stdin.write(b"".join(encode(message) for message in messages))
        self.stdin.flush()

    def log(self) -> str:
        with self._said:
            return "".join(self._lines)

    def wait_for_stderr(self, text: str, count: int = 1, within: float = LONG) -> None:
        """Until stderr has said `text` `count` times (the server's own account of what it did)."""
        with self._said:
            if not self._said.wait_for(lambda: "".join(self._lines).count(text) >= count or self._lines[-1:] == [""], within):
                raise AssertionError(f"the server never said {text!r} {count} times; its stderr:\n{self.log()[-3000:]}")
        assert self.log().count(text) >= count, f"the server ended first; its stderr:\n{self.log()[-3000:]}"

    def stuck(self, **params: Any) -> None:
        """Send the 39 big calls and wait until every one has returned: 2.3 MB of answers wait for
        a pipe that holds 64 KiB, so the server has more than it can write."""
        self.send(*(_call(2 + n, "bulk", {"size": ANSWER_BYTES}, **params) for n in range(CALLS)))
        self.wait_for_stderr("BULK ", CALLS)

    def exits_within(self, seconds: float) -> float:
        started = time.monotonic()
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"mcpsync serve still running {seconds:g} s later; its stderr:\n{self.log()[-3000:]}") from None
        return time.monotonic() - started

    def frames(self) -> Iterator[dict[str, Any]]:
        """Every frame the server wrote, read to its end (the server has exited or will)."""
        for line in self.stdout.read().splitlines():
            yield json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(LONG)
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._stderr.join(LONG)


@pytest.fixture
def unread() -> Iterator[type[Unread]]:
    made: list[Unread] = []

    class Tracked(Unread):
        def __init__(self, *args: str) -> None:
            super().__init__(*args)
            made.append(self)

    yield Tracked
    for child in made:
        child.close()


def _call(request_id: int, name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments, **params}}


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": {"name": "unread", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_sigterm_ends_a_server_whose_client_stopped_reading(unread: type[Unread]) -> None:
    server = unread("--write-timeout", "600")
    server.send(INITIALIZE, INITIALIZED)
    server.stuck()
    server.proc.send_signal(signal.SIGTERM)
    server.exits_within(SHUTDOWN_TIMEOUT + MARGIN)
    assert "the client did not read the last" in server.log()


def test_end_of_input_ends_a_server_whose_client_stopped_reading(unread: type[Unread]) -> None:
    server = unread("--write-timeout", "600")
    server.send(INITIALIZE, INITIALIZED)
    server.stuck()
    server.stdin.close()
    server.exits_within(SHUTDOWN_TIMEOUT + MARGIN)


def test_a_client_that_reads_nothing_for_the_write_timeout_is_gone(unread: type[Unread]) -> None:
    server = unread("--write-timeout", "1")
    server.send(INITIALIZE, INITIALIZED)
    server.stuck()
    server.exits_within(1.0 + SHUTDOWN_TIMEOUT + MARGIN)
    log = server.log()
    assert log.count("the client has not read its output for 1 s; ending the connection as if it had closed it") == 1, log


def test_a_late_reader_gets_every_answer_once_and_a_later_ping(unread: type[Unread]) -> None:
    server = unread("--write-timeout", "600")
    server.send(INITIALIZE, INITIALIZED)
    server.stuck()
    server.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
    server.stdin.close()  # then read it all: the server ends once it has written everything
    frames = list(server.frames())
    server.exits_within(MARGIN)
    ids = [frame["id"] for frame in frames if "id" in frame]
    # Each once; the ping may overtake answers whose tools had returned but were not yet handed over.
    assert ids[0] == 1 and ids.count("ping") == 1, ids
    assert sorted(i for i in ids[1:] if i != "ping") == list(range(2, 2 + CALLS)), ids
    assert all(len(frame["result"]["content"][0]["text"]) == ANSWER_BYTES for frame in frames if frame.get("id") in range(2, 2 + CALLS))


def test_frames_queued_behind_a_full_pipe_keep_their_order(unread: type[Unread]) -> None:
    """Progress 1..50 and then the result, every one, though all of them waited for the reader."""
    server = unread("--write-timeout", "600")
    server.send(INITIALIZE, INITIALIZED)
    server.stuck()
    server.send(_call(100, "steps", {"count": 50}, _meta={"progressToken": "p"}))
    server.stdin.close()
    frames = list(server.frames())
    server.exits_within(MARGIN)
    mine = [frame for frame in frames if frame.get("id") == 100 or frame.get("params", {}).get("progressToken") == "p"]
    assert [frame["params"]["progress"] for frame in mine[:-1]] == list(range(1, 51))
    assert mine[-1]["id"] == 100 and mine[-1]["result"]["content"][0]["text"] == "done"


def test_a_listen_is_acknowledged_before_its_notifications_while_the_pipe_is_full(unread: type[Unread]) -> None:
    """2026-07-28 on one connection: the ack of a listen opened behind 39 unread answers still comes
    before the tagged tools/list_changed that a later call causes."""
    server = unread("--write-timeout", "600")
    meta = modern_meta()
    server.stuck(_meta=meta)
    server.send({"jsonrpc": "2.0", "id": "listen", "method": "subscriptions/listen",
                 "params": {"notifications": {"toolsListChanged": True}, "_meta": meta}})
    server.send(_call(200, "grow", {}, _meta=meta))
    server.wait_for_stderr("GROWN")  # then end the input: at its end, open listens are dropped
    server.stdin.close()
    frames = list(server.frames())
    server.exits_within(MARGIN)
    ack = next(i for i, frame in enumerate(frames) if frame.get("method") == "notifications/subscriptions/acknowledged")
    changed = [i for i, frame in enumerate(frames) if frame.get("method") == "notifications/tools/list_changed"]
    assert changed and all(i > ack for i in changed), [frame.get("method") or frame.get("id") for frame in frames]
    assert frames[changed[0]]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen"
    assert any(frame.get("id") == 200 for frame in frames)


def test_the_writer_leaves_a_pipe_as_it_found_it() -> None:
    """The wire's descriptor is made non-blocking while serving; the process gets it back blocking."""
    read_fd, write_fd = os.pipe()
    try:
        code = ("import os, sys, mcpsync\n"
                "server = mcpsync.Server('t')\n"
                "transport = server.serve_fds(os.open(os.devnull, os.O_RDONLY), int(sys.argv[1]), start=False)\n"
                "transport.serve()\n"
                "print(os.get_blocking(int(sys.argv[1])))\n")
        done = subprocess.run([*serve_argv()[:1], "-c", code, str(write_fd)], pass_fds=(write_fd,), env=base_env(),
                              capture_output=True, text=True, timeout=LONG)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "True"
    finally:
        os.close(read_fd)
        os.close(write_fd)
