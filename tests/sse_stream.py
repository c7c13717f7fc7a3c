"""An event stream read over a real socket, event by event, as a client that resumes reads it:
each event's id comes with it, and a priming event (an id, no data) is `(id, None)`.

Shared by the tests of resumable streams, in one process (tests/transport) and across replicas
(integration/test_session_replicas.py); every read waits at most the socket's timeout.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

from mcpsync.protocol.sse import SseParser


class SseStream:
    """An SSE response: `next()` is (id, message or None), `message()` skips priming events;
    EOFError when the stream ends (or breaks)."""

    def __init__(self, response: http.client.HTTPResponse) -> None:
        assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream", response.read()
        self.response = response
        self.parser = SseParser()
        self.pending: list[tuple[str | None, Any]] = []
        self.retry_ms: int | None = None

    def next(self) -> tuple[str | None, Any]:
        while not self.pending:
            try:
                line = self.response.readline()
            except (http.client.IncompleteRead, ConnectionError) as exc:
                raise EOFError(f"the stream broke: {exc!r}") from exc
            if not line:
                raise EOFError("the stream ended")
            events = self.parser.feed(line)
            if self.parser.retry_ms is not None:
                self.retry_ms = self.parser.retry_ms
            self.pending.extend((event.id, json.loads(event.data) if event.data.strip() else None) for event in events)
        return self.pending.pop(0)

    def message(self) -> tuple[str | None, Any]:
        """The next event that carries a message."""
        while True:
            event_id, message = self.next()
            if message is not None:
                return event_id, message

    def close(self) -> None:
        self.response.close()
