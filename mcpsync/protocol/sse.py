"""Server-Sent Events (`text/event-stream`) as MCP's Streamable HTTP uses them, both ways: the
server's encoding of a JSON-RPC frame as an event, and the client's incremental parser.

They live together so the two sides of one format change together. No I/O, no threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import McpsyncError

MAX_EVENT_BYTES = 64 * 1024 * 1024
"""The largest SSE line or event a parser accepts by default."""


def sse_event(frame: bytes, event_id: str | None = None) -> bytes:
    """One compact JSON-RPC frame (a single line) as an SSE `message` event, with its id if given
    (the server's ids are visible ASCII: no line break can hide in one)."""
    head = b"event: message\n" if event_id is None else b"id: " + event_id.encode("ascii") + b"\nevent: message\n"
    return head + b"data: " + frame.rstrip(b"\n") + b"\n\n"


def sse_priming(event_id: str, retry_ms: int) -> bytes:
    """The first event of a resumable stream (SEP-1699): its id and no data, so a client that loses
    the stream before any message can still reconnect with `Last-Event-ID`, and the `retry` delay
    it should wait before reconnecting."""
    return b"id: " + event_id.encode("ascii") + b"\nretry: " + str(retry_ms).encode() + b"\ndata: \n\n"


MAX_EVENT_DIGITS = 18
"""The longest event number mcpsync reads back from a `Last-Event-ID` (more is no id of its own,
and `int()` of thousands of digits is slow, or refused)."""


def event_number(text: str) -> int | None:
    """The number an event id of mcpsync's (or the part of one after its stream's prefix) stands
    for: ASCII decimal digits only, at most `MAX_EVENT_DIGITS`; None for anything else."""
    if 0 < len(text) <= MAX_EVENT_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return None


class TooLarge(McpsyncError, ValueError):
    """A body, an SSE line or an SSE event over its bound (a client's request fails with it)."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its joined data, its type, and the last event id seen by then."""

    data: bytes
    event: str = "message"
    id: str | None = None


class SseParser:
    """An incremental `text/event-stream` parser (WHATWG rules): `feed()` bytes as they arrive and
    get the events they complete. Lines end in CRLF, LF or CR; `:` lines are comments; `data` lines
    join with newlines; `event`, `id` and `retry` are kept; an event without data is not dispatched
    (but its `id` still counts); an unfinished event at the end of the stream is dropped."""

    _LINE_END = re.compile(rb"\r\n|\r|\n")

    def __init__(self, *, last_event_id: str | None = None, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.last_event_id = last_event_id
        self.retry_ms: int | None = None
        self._max = max_event_bytes
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._size = 0
        self._event = b""
        self._started = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        if not self._started:
            if len(self._buffer) < 3 and b"\xef\xbb\xbf".startswith(bytes(self._buffer)):
                return []
            self._started = True
            if self._buffer.startswith(b"\xef\xbb\xbf"):
                del self._buffer[:3]
        return self._lines(final=False)

    def finish(self) -> list[SseEvent]:
        """The stream ended: complete a line ended by a lone CR; drop any unfinished event."""
        events = self._lines(final=True)
        self._buffer.clear()
        self._data, self._size, self._event = [], 0, b""
        return events

    def _lines(self, *, final: bool) -> list[SseEvent]:
        events: list[SseEvent] = []
        buffer, pos = self._buffer, 0
        while True:
            match = self._LINE_END.search(buffer, pos)
            if match is None or (not final and match.end() == len(buffer) and match.group() == b"\r"):
                break  # a CR at the end of the chunk may be the first half of a CRLF
            event = self._line(bytes(buffer[pos : match.start()]))
            pos = match.end()
            if event is not None:
                events.append(event)
        del buffer[:pos]
        if len(buffer) > self._max:
            raise TooLarge(f"the server sent an SSE line over {self._max} bytes")
        return events

    def _line(self, line: bytes) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._size += len(value) + 1
            if self._size > self._max:
                raise TooLarge(f"the server sent an SSE event over {self._max} bytes")
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id" and b"\0" not in value:
            self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event = self._data, self._event
        self._data, self._size, self._event = [], 0, b""
        if not data:
            return None
        return SseEvent(b"\n".join(data), event.decode("utf-8", "replace") or "message", self.last_event_id)
