"""Process lifecycle and cancellation over a real `python -m mcpsync serve` subprocess.

- End of input: exit 0 promptly when idle; in-flight requests still get their responses first.
- SIGTERM / SIGINT while a tool runs: a bounded, clean exit (code 0, no traceback, no children);
  each request still running or waiting at the shutdown deadline is answered -32603 once.
- `notifications/cancelled`: the cancelled request is never answered, its tool sees `ctx.cancelled`,
  ids keep their JSON type, unknown ids are ignored, `initialize` cannot be cancelled.

Ordering comes from responses and progress notifications, never from sleeping: a ping (or any
request) answered after a cancel proves the reader has handled the cancel, because the reader
handles frames in order and cancels inline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time

import pytest

from wire import (
    REPO_ROOT,
    base_env,
    EraClient,
    ServerProcess,
    children_of,
    encode,
    fixture,
    has_traceback,
    is_notification,
    is_response,
    legacy_init,
    same_id,
    serve_argv,
)

pytestmark = pytest.mark.timeout(60)

ERAS = ["handshake", "modern"]
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}}


def progress_of(token):
    return lambda frame: is_notification(frame, "notifications/progress") and same_id(frame["params"]["progressToken"], token)


def call_frame(client: EraClient, request_id, name: str, arguments: dict, token=None) -> dict:
    meta = {} if token is None else {"progressToken": token}
    params = client.params({"name": name, "arguments": arguments}, **meta)
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def barrier(client: EraClient) -> None:
    """A request answered only after the reader handled everything sent before it."""
    if client.modern:
        client.result("tools/list")
    else:
        client.proc.ping()


# -- end of input ---------------------------------------------------------------------------------

def test_end_of_input_while_idle_exits_zero_promptly() -> None:
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc)
        proc.ping()  # fully started and idle
        started = time.monotonic()
        proc.close_stdin()
        code = proc.wait_exit(5)
        elapsed = time.monotonic() - started
        assert code == 0
        assert elapsed < 1.0, f"took {elapsed:.2f}s to exit after end of input"
        assert proc.drain() == []
        assert proc.stderr_text() == ""


def test_end_of_input_before_anything_was_sent_exits_zero() -> None:
    with ServerProcess(serve_argv()) as proc:
        proc.close_stdin()
        assert proc.wait_exit(5) == 0
        assert proc.drain() == []
        assert not has_traceback(proc.stderr_text())


@pytest.mark.parametrize("era", ERAS)
def test_end_of_input_lets_an_in_flight_request_finish_and_answer(era: str) -> None:
    with ServerProcess(serve_argv()) as proc:
        client = EraClient(proc, era)
        proc.send(call_frame(client, "cd", "countdown", {"steps": 3, "delay": 0.05}, token="eof"))
        proc.expect(progress_of("eof"), what="the first progress notification")
        code, rest = proc.finish()
        assert code == 0
        responses = [frame for frame in rest if is_response(frame, "cd")]
        assert len(responses) == 1, rest
        assert responses[0]["result"]["content"] == [{"type": "text", "text": "counted down 3 steps"}]
        assert not has_traceback(proc.stderr_text())


def test_last_frame_without_a_newline_is_still_served_at_end_of_input() -> None:
    with ServerProcess(serve_argv()) as proc:
        proc.write_raw(encode({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + b'{"jsonrpc":"2.0","id":2,"method":"ping"}')
        code, rest = proc.finish()
        assert code == 0
        assert [frame["id"] for frame in rest] == [1, 2]


def test_server_exits_when_the_client_stops_reading_its_output() -> None:
    """The client closed its end of our stdout: the next write fails and the server stops (exit 0)."""
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(serve_argv(), stdin=subprocess.PIPE, stdout=write_end, stderr=stderr, env=base_env(), cwd=REPO_ROOT)
        os.close(write_end)
        try:
            assert proc.stdin is not None
            os.write(proc.stdin.fileno(), encode({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            with os.fdopen(read_end, "rb", buffering=0) as reader:
                assert reader.readline() == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
            os.write(proc.stdin.fileno(), encode({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
            assert proc.wait(timeout=5) == 0
            stderr.seek(0)
            assert not has_traceback(stderr.read().decode())
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=5)
            proc.stdin.close()


# -- signals --------------------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize(
    "target, tool, arguments",
    [
        (None, "countdown", {"steps": 1000, "delay": 0.05}),
        ("toolbox.py", "block", {"key": "signal"}),
        ("toolbox.py", "wait_cancel", {"seconds": 30}),
    ],
    ids=["demo-countdown", "toolbox-block", "toolbox-wait-cancel"],
)
def test_signal_while_a_tool_runs_exits_promptly_and_cleanly(signum: int, target: str | None, tool: str, arguments: dict) -> None:
    argv = serve_argv() if target is None else serve_argv(fixture(target))
    with ServerProcess(argv) as proc:
        legacy_init(proc)
        proc.send({"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": {"name": tool, "arguments": arguments, "_meta": {"progressToken": "sig"}}})
        proc.expect(progress_of("sig"), what="the tool's first progress notification")
        assert children_of(proc.pid) == [], "the server started child processes of its own"
        started = time.monotonic()
        proc.signal(signum)
        code = proc.wait_exit(5)
        elapsed = time.monotonic() - started
        assert code == 0, proc.stderr_tail()
        assert elapsed < 2.0, f"took {elapsed:.2f}s to exit after {signal.Signals(signum).name}"
        rest = proc.drain()
        assert all(not is_response(frame) or same_id(frame["id"], "long") for frame in rest), rest
        stderr = proc.stderr_text()
        assert not has_traceback(stderr), stderr
        assert "KeyboardInterrupt" not in stderr
        if tool == "block":
            assert "outcome=cancelled ctx.cancelled=True" in stderr
        if tool == "wait_cancel":
            assert "WAIT-CANCEL-ENDED cancelled=True ctx.cancelled=True" in stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_while_idle_exits_zero(signum: int) -> None:
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc)
        proc.ping()
        proc.signal(signum)
        assert proc.wait_exit(3) == 0
        assert proc.drain() == []
        assert not has_traceback(proc.stderr_text())


SHUTTING_DOWN = {"code": -32603, "message": "the server is shutting down"}


@pytest.mark.parametrize("era", ERAS)
def test_signal_while_a_tool_ignores_cancellation_answers_it_once_and_exits_within_the_shutdown_timeout(era: str) -> None:
    # toolbox's Server has shutdown_timeout=1.0; the stubborn tool would run for 30 s.
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        client = EraClient(proc, era)
        proc.send(call_frame(client, "stubborn", "stubborn", {"seconds": 30}, token="s"))
        proc.expect(progress_of("s"), what="the stubborn tool's progress")
        started = time.monotonic()
        proc.signal(signal.SIGTERM)
        answer = proc.response("stubborn", timeout=3.0)
        try:
            code = proc.wait_exit(3.0)
        finally:
            elapsed = time.monotonic() - started
        assert answer["error"] == SHUTTING_DOWN, answer
        assert code == 0
        assert elapsed < 3.0
        assert not any(is_response(frame) for frame in proc.drain()), "a request was answered twice"
        assert not has_traceback(proc.stderr_text())


@pytest.mark.parametrize(
    "era, argv",
    [("handshake", ["--workers", "1"]), ("modern", [])],
    ids=["queued-behind-a-busy-worker", "held-back-on-an-unlocked-connection"],
)
def test_signal_answers_the_requests_that_never_ran(era: str, argv: list[str]) -> None:
    """The second request never starts: its only worker is taken (handshake, one worker), or the
    reader holds it back until the first request of an unlocked connection has locked the era
    (2026-07-28). Both are in one write, so the first one's progress proves both were read."""
    with ServerProcess(serve_argv(fixture("toolbox.py"), *argv)) as proc:
        client = EraClient(proc, era, probe=False)
        first = call_frame(client, "first", "stubborn", {"seconds": 30}, token="f")
        second = call_frame(client, "second", "whoami", {})
        proc.write_raw(encode(first) + encode(second))
        proc.expect(progress_of("f"), what="the stubborn tool's progress")
        proc.signal(signal.SIGTERM)
        answers = [proc.response(request_id, timeout=3.0) for request_id in ("first", "second")]
        assert proc.wait_exit(3.0) == 0
        assert [answer["error"] for answer in answers] == [SHUTTING_DOWN, SHUTTING_DOWN], answers
        assert not any(is_response(frame) for frame in proc.drain()), "a request was answered twice"


def test_sigterm_during_the_first_modern_request_exits_promptly() -> None:
    with ServerProcess(serve_argv()) as proc:
        client = EraClient(proc, "modern", probe=False)
        proc.send(call_frame(client, "first", "countdown", {"steps": 40, "delay": 0.05}, token="first"))
        proc.expect(progress_of("first"), what="the countdown's first progress")
        started = time.monotonic()
        proc.signal(signal.SIGTERM)
        code = proc.wait_exit(5)
        elapsed = time.monotonic() - started
        assert code == 0
        assert elapsed < 1.0, f"took {elapsed:.2f}s to exit after SIGTERM"


def test_normal_run_writes_nothing_to_stderr() -> None:
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc)
        proc.result("tools/list")
        for name, arguments in [("echo", {"text": "x"}), ("add", {"a": 1, "b": 2}), ("word_stats", {"text": "a b"}), ("fail", {}), ("countdown", {"steps": 2, "delay": 0})]:
            proc.result("tools/call", {"name": name, "arguments": arguments})
        proc.error("tools/call", {"name": "nope"})
        assert proc.result("tools/call", {"name": "add", "arguments": {"a": "x"}})["isError"] is True
        proc.result("prompts/get", {"name": "review_code", "arguments": {"code": "x"}})
        proc.result("resources/read", {"uri": "demo://greeting/Ada"})
        proc.error("resources/read", {"uri": "demo://nothing"})
        proc.send(b"garbage\n")
        proc.recv()
        code, rest = proc.finish()
        assert code == 0 and rest == []
        assert proc.stderr_text() == ""


# -- cancellation ---------------------------------------------------------------------------------

@pytest.mark.parametrize("era", ERAS)
def test_cancelled_countdown_is_never_answered(era: str) -> None:
    with ServerProcess(serve_argv()) as proc:
        client = EraClient(proc, era)
        proc.send(call_frame(client, "cd", "countdown", {"steps": 200, "delay": 0.05}, token="ct"))
        proc.expect(progress_of("ct"), what="the countdown's first progress")
        proc.cancel("cd", reason="changed my mind")
        barrier(client)
        mark = len(proc.lines)
        code, rest = proc.finish()
        assert code == 0
        assert not any(is_response(frame, "cd") for frame in rest), rest
        # Nothing at all was written for the countdown after the cancel had been handled.
        assert rest == [], rest
        assert len(proc.lines) == mark
        assert not has_traceback(proc.stderr_text())


def test_cancel_of_the_first_modern_request_on_an_unlocked_connection() -> None:
    with ServerProcess(serve_argv()) as proc:
        client = EraClient(proc, "modern", probe=False)
        proc.send(call_frame(client, "first", "countdown", {"steps": 30, "delay": 0.05}, token="first"))
        proc.expect(progress_of("first"), what="the countdown's first progress")
        proc.cancel("first")
        barrier(client)
        code, rest = proc.finish()
        assert code == 0
        answered = [frame for frame in proc.notifications + rest if is_response(frame, "first")]
        answered += [frame for frame in list(proc._backlog) if is_response(frame, "first")]
        assert not answered and not any(b'"id":"first"' in line for line in proc.lines)


@pytest.mark.parametrize("era", ERAS)
def test_cancelled_tool_sees_ctx_cancelled(era: str) -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        client = EraClient(proc, era)
        proc.send(call_frame(client, 41, "wait_cancel", {"seconds": 30}, token=41))
        proc.expect(progress_of(41), what="wait_cancel's progress")
        started = time.monotonic()
        proc.cancel(41)
        barrier(client)
        code, rest = proc.finish()
        assert code == 0 and rest == []
        assert time.monotonic() - started < 5
        assert "WAIT-CANCEL-ENDED cancelled=True ctx.cancelled=True" in proc.stderr_text()


@pytest.mark.parametrize("request_id, cancel_id", [(7, "7"), ("7", 7), (1, True), (1, 1.0)], ids=["int-vs-str", "str-vs-int", "int-vs-bool", "int-vs-float"])
def test_cancel_matches_ids_with_their_json_type(request_id, cancel_id) -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        legacy_init(proc)
        proc.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "block", "arguments": {"key": "typed"}, "_meta": {"progressToken": "typed"}}})
        proc.expect(progress_of("typed"), what="block's progress")
        proc.cancel(cancel_id)
        proc.ping()
        proc.result("tools/call", {"name": "release", "arguments": {"key": "typed"}})
        response = proc.response(request_id)
        assert response["result"]["content"] == [{"type": "text", "text": "released"}]
        code, rest = proc.finish()
        assert code == 0 and rest == []
        assert "outcome=released ctx.cancelled=False" in proc.stderr_text()


def test_cancel_of_unknown_or_finished_ids_is_ignored() -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        legacy_init(proc)
        proc.send({"jsonrpc": "2.0", "id": "busy", "method": "tools/call", "params": {"name": "block", "arguments": {"key": "u"}, "_meta": {"progressToken": "u"}}})
        proc.expect(progress_of("u"), what="block's progress")
        finished = proc.request("ping", id="done")
        assert finished["result"] == {}
        for request_id in ["done", 12345, "nobody", None, [], {"id": "busy"}]:
            proc.cancel(request_id)
        proc.notify("notifications/cancelled")  # no params at all
        proc.ping()
        proc.result("tools/call", {"name": "release", "arguments": {"key": "u"}})
        assert proc.response("busy")["result"]["content"][0]["text"] == "released"
        code, rest = proc.finish()
        assert code == 0 and rest == []


def test_initialize_cannot_be_cancelled() -> None:
    with ServerProcess(serve_argv()) as proc:
        init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT}
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "init"}}
        proc.write_raw(encode(init) + encode(cancel))
        assert proc.response("init")["result"]["protocolVersion"] == "2025-11-25"
        # The connection is initialized: a second initialize is refused.
        assert proc.error("initialize", INIT)["code"] == -32600


def test_cancel_of_a_queued_request_that_never_started() -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"), "--workers", "1")) as proc:
        legacy_init(proc)
        proc.send({"jsonrpc": "2.0", "id": "running", "method": "tools/call", "params": {"name": "block", "arguments": {"key": "q"}, "_meta": {"progressToken": "q"}}})
        proc.expect(progress_of("q"), what="block's progress")
        proc.send({"jsonrpc": "2.0", "id": "queued", "method": "tools/call", "params": {"name": "whoami", "arguments": {}}})
        proc.cancel("queued")
        proc.cancel("running")
        proc.ping()
        code, rest = proc.finish()
        assert code == 0
        assert rest == [], f"a cancelled request was answered: {rest!r}"
        assert proc.stderr_text().count("BLOCK-ENDED") == 1
