"""stdio framing, pinned over a real `python -m mcpsync serve` subprocess (BEHAVIOR.md, "Framing").

Every row of the framing table has a test here, plus the output format (compact, one message per
line, LF only, UTF-8) and fd isolation (a tool writing to stdout cannot corrupt the wire).

Tests that only send frames that lock nothing share one server per module (`demo`, one worker);
each of them ends with a ping, which the server answers only after it has answered everything sent
before, so a test never leaves work behind for the next one. Tests that need the end of output get their own.
"""

from __future__ import annotations

import json

import pytest

from wire import (
    ServerProcess,
    children_of,
    encode,
    fixture,
    has_traceback,
    is_response,
    legacy_init,
    proc_status_kb,
    serve_argv,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def shared():
    # One worker: a request that goes to it and the probe ping read after it (which then queues
    # behind it, the worker being busy) are answered in that order. With more, a ping the reader
    # answers itself may overtake an error a worker is still writing, as JSON-RPC allows.
    with ServerProcess(serve_argv("--workers", "1")) as proc:
        yield proc


@pytest.fixture
def demo(shared: ServerProcess) -> ServerProcess:
    """The module's demo server, checked alive and quiet before each test."""
    assert shared.proc is not None and shared.proc.poll() is None, shared.stderr_tail()
    assert not shared._backlog, f"frames left over from an earlier test: {list(shared._backlog)!r}"
    shared.mark_stderr()
    return shared


def answers_until_ping(proc: ServerProcess, payload: bytes, ping_id: str = "after") -> list[dict]:
    """Write `payload` and a ping in one write; every frame the server wrote before the ping's
    response (the reader handles frames in order, and answers broken ones inline)."""
    proc.write_raw(payload + encode({"jsonrpc": "2.0", "id": ping_id, "method": "ping"}))
    before = []
    while True:
        frame = proc.recv()
        if is_response(frame, ping_id):
            assert frame["result"] == {}
            return before
        before.append(frame)


def assert_error(frame: dict, code: int, request_id, message_part: str | None = None) -> None:
    assert set(frame) == {"jsonrpc", "id", "error"}, frame
    assert frame["jsonrpc"] == "2.0"
    assert type(frame["id"]) is type(request_id) and frame["id"] == request_id, frame
    assert frame["error"]["code"] == code, frame
    assert isinstance(frame["error"]["message"], str) and frame["error"]["message"]
    if message_part is not None:
        assert message_part in frame["error"]["message"], frame


# -- not JSON, blank lines, CRLF ------------------------------------------------------------------

@pytest.mark.parametrize(
    "line",
    [b"not json", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"{'id': 1}", b"}", b'{"a":1}{"b":2}', b"nul"],
    ids=["text", "truncated", "single-quotes", "brace", "two-objects", "bad-literal"],
)
def test_non_json_line_is_parse_error_with_null_id_and_serving_continues(demo: ServerProcess, line: bytes) -> None:
    before = answers_until_ping(demo, line + b"\n")
    assert len(before) == 1, before
    assert_error(before[0], -32700, None)


def test_blank_lines_are_ignored_and_crlf_is_accepted(demo: ServerProcess) -> None:
    ping_crlf = b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n'
    before = answers_until_ping(demo, b"\n\n   \n\t\n\r\n" + ping_crlf + b"\r\n\n")
    assert before == [{"jsonrpc": "2.0", "id": "crlf", "result": {}}]


def test_a_frame_split_across_writes_is_reassembled(demo: ServerProcess) -> None:
    frame = encode({"jsonrpc": "2.0", "id": "split", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "joined"}}})
    demo.write_raw(frame[:20])
    demo.write_raw(frame[20:-5])
    demo.write_raw(frame[-5:])
    response = demo.response("split")
    assert response["result"]["content"] == [{"type": "text", "text": "joined"}]


# -- batches, scalars, objects that are nothing ---------------------------------------------------

@pytest.mark.parametrize(
    "payload",
    [
        b'[{"jsonrpc":"2.0","id":"in-batch","method":"ping"}]',
        b"[]",
        b"42",
        b'"a string"',
        b"null",
        b"true",
        b"{}",
        b'{"jsonrpc":"2.0"}',
        b'{"foo":"bar"}',
        b'{"jsonrpc":"2.0","id":5}',
    ],
    ids=["batch", "empty-batch", "number", "string", "null", "bool", "empty-object", "only-jsonrpc", "unrelated-object", "id-only"],
)
def test_batch_scalar_and_shapeless_object_are_invalid_request_with_null_id(demo: ServerProcess, payload: bytes) -> None:
    before = answers_until_ping(demo, payload + b"\n")
    assert len(before) == 1, f"expected exactly one answer, got {before!r}"  # nothing inside a batch runs
    assert_error(before[0], -32600, None)


# -- ids ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad_id", ["true", "false", "1.5", "1.0", "-0.0", "1e3", "null", "[1]", '{"a":1}', "[]"])
def test_unusable_request_id_is_invalid_request_with_null_id(demo: ServerProcess, bad_id: str) -> None:
    payload = ('{"jsonrpc":"2.0","id":%s,"method":"ping"}\n' % bad_id).encode()
    before = answers_until_ping(demo, payload)
    assert len(before) == 1, before
    assert_error(before[0], -32600, None)


@pytest.mark.parametrize("request_id", [0, -1, 2**53 + 1, 2**64, -(2**63) - 1, "", "7", "id with spaces ☃", "a\\\"b"], ids=repr)
def test_ids_are_echoed_with_their_json_type(demo: ServerProcess, request_id) -> None:
    response = demo.request("ping", id=request_id)
    assert type(response["id"]) is type(request_id) and response["id"] == request_id


def test_duplicate_in_flight_id_is_rejected_and_the_first_request_is_unaffected() -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        legacy_init(proc)
        proc.send(proc.request_frame("tools/call", {"name": "block", "arguments": {"key": "dup"}, "_meta": {"progressToken": "dup"}}, id=5))
        started = proc.expect(lambda f: f.get("method") == "notifications/progress", what="block's progress")
        assert started["params"]["progressToken"] == "dup"

        duplicate = proc.request("tools/list", id=5)
        assert_error(duplicate, -32600, 5)
        # "5" is a different id from 5: served normally while 5 is in flight.
        assert "tools" in proc.result("tools/list", id="5")

        assert proc.result("tools/call", {"name": "release", "arguments": {"key": "dup"}})["content"][0]["text"] == "ok"
        first = proc.response(5)
        assert first["result"]["content"] == [{"type": "text", "text": "released"}]
        assert first["result"]["isError"] is False
        # Once answered, the id may be used again.
        assert proc.request("ping", id=5) == {"jsonrpc": "2.0", "id": 5, "result": {}}
        code, rest = proc.finish()
        assert code == 0 and rest == []
        assert "outcome=released ctx.cancelled=False" in proc.stderr_text()


# -- size limit -----------------------------------------------------------------------------------

def test_frame_over_the_limit_is_rejected_without_buffering_it_and_the_next_frame_is_served() -> None:
    limit = 65536
    with ServerProcess(serve_argv("--max-frame-bytes", str(limit))) as proc:
        legacy_init(proc)
        # Just under the limit is served.
        text = "u" * (limit - 200)
        under = proc.result("tools/call", {"name": "echo", "arguments": {"text": text}})
        assert under["content"][0]["text"] == text
        # Warm up the same code path once more, then take the high-water mark.
        proc.ping()
        hwm_before = proc_status_kb(proc.pid, "VmHWM")

        big_size = 8 * 1024 * 1024
        big = encode({"jsonrpc": "2.0", "id": "big", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x" * big_size}}})
        after = encode({"jsonrpc": "2.0", "id": "next", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "still here"}}})
        proc.write_raw(big + after)

        rejected = proc.recv()
        assert_error(rejected, -32600, None, "frame too large")
        served = proc.response("next")
        assert served["result"]["content"] == [{"type": "text", "text": "still here"}]
        proc.ping()
        hwm_after = proc_status_kb(proc.pid, "VmHWM")
        grown_kb = hwm_after - hwm_before
        assert grown_kb < 2 * 1024, f"peak RSS grew by {grown_kb} kB for an {big_size // 1024} kB frame: it was buffered"

        # Just over the limit is rejected too, with nothing for its id.
        over = encode({"jsonrpc": "2.0", "id": "over", "method": "ping", "params": {"pad": "o" * limit}})
        before = answers_until_ping(proc, over)
        assert len(before) == 1
        assert_error(before[0], -32600, None, "frame too large")
        code, rest = proc.finish()
        assert code == 0 and rest == []
        assert not has_traceback(proc.stderr_text())


# -- encoding -------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "payload",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff\xfe"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xed\xa0\x80"}}',  # a UTF-8-encoded surrogate
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xc0\xaf"}}',  # overlong
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xe2\x98"}}',  # truncated sequence
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\x80"}}',
    ],
    ids=["ff-fe", "encoded-surrogate", "overlong", "truncated", "stray-continuation"],
)
def test_invalid_utf8_is_a_parse_error(demo: ServerProcess, payload: bytes) -> None:
    before = answers_until_ping(demo, payload + b"\n")
    assert len(before) == 1, before
    assert_error(before[0], -32700, None)


# -- a usable id with something else wrong --------------------------------------------------------

@pytest.mark.parametrize(
    "message, code",
    [
        ({"jsonrpc": "1.0", "id": 3, "method": "ping"}, -32600),
        ({"id": 3, "method": "ping"}, -32600),
        ({"jsonrpc": 2.0, "id": 3, "method": "ping"}, -32600),
        ({"jsonrpc": "2.0", "id": 3, "method": 5}, -32600),
        ({"jsonrpc": "2.0", "id": 3, "method": None}, -32600),
        ({"jsonrpc": "2.0", "id": 3, "method": ["ping"]}, -32600),
        ({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": [1]}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": "x"}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": 7}}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5}}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": [1]}}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": 12}}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "not-ours"}}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "loud"}}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "completion/complete", "params": {"ref": "x"}}, -32602),
        ({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"}, -32601),
    ],
    ids=[
        "jsonrpc-1.0", "jsonrpc-missing", "jsonrpc-number", "method-number", "method-null", "method-array",
        "params-array", "params-string", "meta-not-object", "tool-name-number", "arguments-array",
        "cursor-number", "cursor-foreign", "bad-log-level", "completion-bad-ref", "unknown-method",
    ],
)
@pytest.mark.parametrize("request_id", [3, "three"])
def test_usable_id_with_anything_else_wrong_gets_exactly_one_error_with_that_id(demo: ServerProcess, message: dict, code: int, request_id) -> None:
    message = {**message, "id": request_id}
    before = answers_until_ping(demo, encode(message))
    assert len(before) == 1, f"expected exactly one answer, got {before!r}"
    assert_error(before[0], code, request_id)


def test_params_null_is_invalid_params_with_that_id(demo: ServerProcess) -> None:
    """BEHAVIOR.md: `params` not an object → -32602 with the id (JSON-RPC 2.0: params, when present,
    is a structured value; null is not)."""
    before = answers_until_ping(demo, b'{"jsonrpc":"2.0","id":"pnull","method":"ping","params":null}\n')
    assert len(before) == 1, before
    assert_error(before[0], -32602, "pnull")


def test_large_response_arrives_whole_on_one_line(demo: ServerProcess) -> None:
    text = "0123456789abcdef" * 65536  # 1 MiB
    result = demo.result("tools/call", {"name": "echo", "arguments": {"text": text}}, id="large")
    assert result["content"][0]["text"] == text
    demo.ping()


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(
            {"method": "completion/complete", "params": {"ref": {"type": "ref/prompt", "name": ["review_code"]}, "argument": {"name": "language", "value": ""}}},
            id="completion-ref-name-list",
        ),
        pytest.param(
            {"method": "completion/complete", "params": {"ref": {"type": "ref/prompt", "name": {"n": 1}}, "argument": {"name": "language", "value": ""}}},
            id="completion-ref-name-object",
        ),
        pytest.param(
            {"method": "logging/setLevel", "params": {"level": ["info"]}},
            id="set-level-list",
        ),
        pytest.param(
            {"method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/logLevel": ["info"]}}},
            id="envelope-log-level-list",
        ),
        pytest.param({"method": "logging/setLevel", "params": {"level": 5}}, id="set-level-number"),
        pytest.param({"method": "completion/complete", "params": {"ref": {"type": "ref/prompt", "name": 5}, "argument": {"name": "language", "value": ""}}}, id="completion-ref-name-number"),
        pytest.param({"method": "prompts/get", "params": {"name": ["review_code"]}}, id="prompt-name-list"),
        pytest.param({"method": "tools/call", "params": {"name": {"n": "echo"}}}, id="tool-name-object"),
        pytest.param({"method": "resources/read", "params": {"uri": ["demo://readme"]}}, id="uri-list"),
    ],
)
def test_params_of_the_wrong_json_type_are_invalid_params_not_internal_errors(demo: ServerProcess, message: dict) -> None:
    frame = {"jsonrpc": "2.0", "id": "typed", **message}
    before = answers_until_ping(demo, encode(frame))
    assert len(before) == 1, before
    assert_error(before[0], -32602, "typed")
    assert not has_traceback(demo.stderr_since_mark())


# -- hostile inputs -------------------------------------------------------------------------------

DEPTH = 100_000
HOSTILE = {
    "deep-array-unterminated": b"[" * DEPTH,
    "deep-array-in-params": b'{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"a":' + b"[" * DEPTH + b"]" * DEPTH + b"}}",
    "deep-object-in-params": b'{"jsonrpc":"2.0","id":"deep","method":"ping","params":' + b'{"a":' * DEPTH + b"1" + b"}" * DEPTH + b"}",
    "10000-digit-id": b'{"jsonrpc":"2.0","id":' + b"9" * 10000 + b',"method":"ping"}',
    "10000-digit-argument": b'{"jsonrpc":"2.0","id":"num","method":"tools/call","params":{"name":"add","arguments":{"a":' + b"7" * 10000 + b',"b":1}}}',
    "10000-digit-float": b'{"jsonrpc":"2.0","id":"num","method":"tools/call","params":{"name":"add","arguments":{"a":1.' + b"5" * 10000 + b',"b":1}}}',
    "huge-exponent": b'{"jsonrpc":"2.0","id":"num","method":"tools/call","params":{"name":"add","arguments":{"a":1e999999999,"b":1}}}',
    "lone-surrogate-in-argument": b'{"jsonrpc":"2.0","id":"sur","method":"tools/call","params":{"name":"echo","arguments":{"text":"a\\ud800b"}}}',
    "lone-low-surrogate-id": b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}',
    "lone-surrogate-method": b'{"jsonrpc":"2.0","id":"sur","method":"\\ud83d"}',
    "lone-surrogate-key": b'{"jsonrpc":"2.0","id":"sur","method":"tools/call","params":{"name":"echo","arguments":{"\\ud800":"x"}}}',
    "nul-bytes": b'{"jsonrpc":"2.0","id":"nul","method":"ping"}\x00\x00',
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_frames_get_at_most_one_answer_and_never_crash_or_stall(demo: ServerProcess, name: str) -> None:
    before = answers_until_ping(demo, HOSTILE[name] + b"\n")
    assert len(before) <= 1, before
    for frame in before:
        assert set(frame) >= {"jsonrpc", "id"} and ("result" in frame or "error" in frame), frame
    if name.startswith(("deep-array-unterminated", "10000-digit-id")):
        # Not a usable request: the answer is an error with a null id.
        assert len(before) == 1 and "error" in before[0] and before[0]["id"] is None, before
    if name.startswith(("10000-digit-argument", "10000-digit-float", "huge-exponent")):
        # The frame cannot be answered as a successful addition. It runs on a worker, so the ping
        # (which does not wait for it) may be answered first; a second answer would be left over
        # for the next test, which the fixture refuses.
        answer = before[0] if before else demo.response("num")
        assert "error" in answer or answer["result"]["isError"], answer
    assert not has_traceback(demo.stderr_since_mark())


def test_lone_surrogate_round_trips_as_a_json_escape(demo: ServerProcess) -> None:
    demo.write_raw(HOSTILE["lone-surrogate-in-argument"] + b"\n")
    response = demo.response("sur")
    assert response["result"]["content"] == [{"type": "text", "text": "a\ud800b"}]
    line = next(raw for raw in reversed(demo.lines) if b'"sur"' in raw)
    line.decode("utf-8")  # the wire stays valid UTF-8: the surrogate is escaped, never encoded raw
    assert b"\\ud800" in line


# -- notifications --------------------------------------------------------------------------------

NOTIFICATIONS = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
    {"jsonrpc": "2.0", "method": "notifications/no-such-thing"},
    {"jsonrpc": "2.0", "method": "ping"},
    {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}},
    {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}}},
    {"jsonrpc": "1.0", "method": "notifications/initialized"},
    {"method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": 5},
    {"jsonrpc": "2.0", "method": "notifications/initialized", "params": [1, 2]},
    {"jsonrpc": "2.0", "method": "notifications/initialized", "params": "x"},
    {"jsonrpc": "2.0", "id": 99, "result": {}},  # a response to a request the server never sent
    {"jsonrpc": "2.0", "id": 98, "error": {"code": -1, "message": "no"}},
    {"jsonrpc": "2.0", "id": 97.5, "result": {}},
    {"jsonrpc": "2.0", "id": 96, "error": "not an object"},
]


def test_notifications_valid_or_not_are_never_answered() -> None:
    with ServerProcess(serve_argv()) as proc:
        before = answers_until_ping(proc, b"".join(encode(n) for n in NOTIFICATIONS))
        assert before == []
        # The notification-shaped initialize did not initialize the connection.
        assert proc.result("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})["protocolVersion"] == "2025-11-25"
        code, rest = proc.finish()
        assert code == 0
        assert rest == [], f"something answered a notification: {rest!r}"


# -- output format --------------------------------------------------------------------------------

def test_output_is_compact_utf8_one_message_per_lf_terminated_line() -> None:
    text = "héllo ☃ 日本語 🎉 a/b </script>\nsecond line\ttab \"quoted\" back\\slash"
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc)
        result = proc.result("tools/call", {"name": "echo", "arguments": {"text": text}}, id="utf8")
        assert result["content"][0]["text"] == text
        proc.result("tools/call", {"name": "word_stats", "arguments": {"text": "a b a"}})
        proc.error("tools/call", {"name": "nope"})
        code, rest = proc.finish()
        assert code == 0 and rest == []

    raw = bytes(proc.raw_stdout)
    assert raw.endswith(b"\n")
    assert b"\r" not in raw
    raw.decode("utf-8")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == 4
    for line in lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        compact = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        assert line == compact, f"not compact: {line[:300]!r}"
    utf8_line = next(line for line in lines if b'"utf8"' in line)
    # Non-ASCII travels as UTF-8, not as \u escapes; the slash is not escaped either.
    assert "héllo ☃ 日本語 🎉 a/b".encode("utf-8") in utf8_line
    assert b"\\u" not in utf8_line


# -- fd isolation ---------------------------------------------------------------------------------

def test_tool_writing_to_stdout_cannot_corrupt_the_wire() -> None:
    with ServerProcess(serve_argv(fixture("noisy_app.py"))) as proc:
        legacy_init(proc)
        for tag in ("one", "two"):
            result = proc.result("tools/call", {"name": "noisy", "arguments": {"tag": tag}})
            assert result["content"] == [{"type": "text", "text": f"noisy {tag} done"}]
        proc.ping()
        assert children_of(proc.pid) == [], "the tool's child process was left behind"
        code, rest = proc.finish()
        assert code == 0 and rest == []

    for line in proc.lines:
        message = json.loads(line)  # every stdout line is JSON-RPC
        assert message["jsonrpc"] == "2.0" and ("result" in message or "error" in message)
    stderr = proc.stderr_text()
    for tag in ("one", "two"):
        for marker in ("PRINTED", "STDOUT-WRITE", "OS-WRITE", "CHILD-ECHO", "UNFLUSHED"):
            assert f"{marker}-{tag}" in stderr, f"{marker}-{tag} did not reach stderr:\n{stderr}"
    assert b"PRINTED" not in proc.raw_stdout and b"CHILD-ECHO" not in proc.raw_stdout
    assert not has_traceback(stderr)


def test_tool_reading_stdin_sees_end_of_file_and_steals_no_frames() -> None:
    with ServerProcess(serve_argv(fixture("noisy_app.py"))) as proc:
        legacy_init(proc)
        call = proc.request_frame("tools/call", {"name": "read_stdin", "arguments": {}}, id="reader")
        proc.write_raw(encode(call) + encode({"jsonrpc": "2.0", "id": "p1", "method": "ping"}))
        result = proc.response("reader")["result"]
        assert result["structuredContent"] == {"fd0": "", "stdin": ""}
        assert proc.response("p1")["result"] == {}
        proc.ping()
        code, rest = proc.finish()
        assert code == 0 and rest == []
