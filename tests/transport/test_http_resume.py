"""The parts of POST-stream resumption a socket cannot reach deterministically: the event log's ids
and replay, and the grace after which a request nobody came back for is cancelled."""

from __future__ import annotations

import threading

import pytest

from mcpsync import Context, Server, Service
from mcpsync.protocol.jsonrpc import Request
from mcpsync.transport.http._resume import DetachedStreams, StreamLog
from mcpsync.transport.http._stream import RELEASE, Exchange

from .._timeouts import LONG
from .pipes import PipeClient

pytestmark = pytest.mark.timeout(30)


def exchange() -> Exchange:
    return Exchange(Request(1, "tools/call", {}), streams=True, capacity=8)


def test_a_stream_numbers_its_events_and_replays_those_after_an_id() -> None:
    stream = StreamLog(kept=2)
    assert stream.position.endswith(".0") and stream.position.startswith("p")
    first = stream.event(b'{"a":1}')
    stream.event(b'{"a":2}')
    stream.event(b'{"a":3}')
    assert first.startswith(b"id: " + stream.prefix.encode() + b"1\n")
    assert stream.number_of(stream.prefix + "2") == 2
    assert stream.number_of("p-other.2") is None and stream.number_of(stream.prefix + "\u0662") is None
    assert stream.number_of(stream.prefix + "1" * 5000) is None  # no id of ours, never int() of it
    assert stream.after(1) == stream.after(0)  # the first is no longer kept: two are
    assert stream.after(2).count(b"data: ") == 1 and b'{"a":3}' in stream.after(2)


def test_a_detached_request_is_taken_back_by_its_session_only() -> None:
    streams = DetachedStreams(grace=LONG)
    held, stream = exchange(), StreamLog()
    stream.event(b"{}")
    assert streams.detach(held, stream, "session-1")
    assert streams.take("session-2", stream.prefix + "1") is None
    assert streams.take("session-1", stream.prefix + "1") == (held, stream, 1)
    assert streams.take("session-1", stream.prefix + "1") is None  # once
    streams.close()


def test_a_request_nobody_comes_back_for_is_cancelled_after_the_grace() -> None:
    streams = DetachedStreams(grace=0.0)
    held = exchange()
    assert streams.detach(held, StreamLog(), "session-1")
    assert held.cancel_event.wait(LONG) and held.answered.result(LONG) is None
    streams.close()
    assert not streams.detach(exchange(), StreamLog(), "session-1")  # closed: nothing kept


def test_closing_cancels_what_is_still_detached() -> None:
    streams = DetachedStreams(grace=LONG)
    held = exchange()
    streams.detach(held, StreamLog(), "s")
    streams.close()
    assert held.cancel_event.is_set() and held.channel.closed


def test_closing_the_stream_on_stdio_does_nothing() -> None:
    service = Service("polling")

    @service.tool
    def long_job(ctx: Context) -> str:
        """Tries to free its connection."""
        return f"released: {ctx.close_stream()}"

    server = Server("polling", services=[service])
    with PipeClient(server) as client:
        client.initialize()
        response, _ = client.request("tools/call", {"name": "long_job", "arguments": {}}, id=2)
        assert response["result"]["content"][0]["text"] == "released: False"
    server.close(LONG)


def test_a_resume_of_a_stream_still_attached_asks_its_response_to_end_and_takes_it() -> None:
    streams = DetachedStreams(grace=LONG)
    held, stream = exchange(), StreamLog()
    stream.event(b"{}")
    streams.attach(held, stream, "s")

    def old_response() -> None:  # the old body reads RELEASE, ends, and its close detaches it
        assert held.channel.get(LONG) is RELEASE
        streams.detach(held, stream, "s")

    ending = threading.Thread(target=old_response)
    ending.start()
    assert streams.take("s", stream.prefix + "1") == (held, stream, 1)
    ending.join(LONG)
    streams.close()


def test_a_resume_of_a_stream_that_ends_on_its_own_meanwhile_gets_nothing() -> None:
    streams = DetachedStreams(grace=LONG)
    held, stream = exchange(), StreamLog()
    stream.event(b"{}")
    streams.attach(held, stream, "s")
    ending = threading.Thread(target=lambda: (held.channel.get(LONG), streams.finished(stream)))
    ending.start()
    assert streams.take("s", stream.prefix + "1") is None  # it reached its end: nothing to take over
    ending.join(LONG)
    assert streams.take("s", stream.prefix + "1", wait=0.0) is None
    streams.close()
