"""The request-body bytes `WsgiServer` holds at once, across every connection: one budget.

Why: the server reads each body whole before the application runs (`_parse`), so what one
request may hold (`max_body_bytes`) times the connections it may hold (`max_connections`) would
be its memory, unless the total is bounded too. A body takes its share when the request's head
has passed the application's head check (`WsgiServer(head_check=...)`, e.g. its authentication),
so a caller the application would refuse never holds any: the whole `Content-Length` at once (a
body that cannot have it is refused before a byte of it is read), a chunked body piece by piece.
It gives it back once its request has been answered, or its connection closed. The last
`reserve` bytes are for small bodies (`SMALL_BODY`, what an MCP request is) only, so large bodies
(a caller's uploads, or an attacker's with a valid token) cannot keep small requests out.

Why a refusal and not a wait: the request that does not fit is answered 503 with `Retry-After`
at its head, before its client sends the body, so neither side spends anything on it, and the
client knows when to come back; a wait would hold the connection and the client's bytes in the
kernel's buffers for as long as the bodies ahead take, which an attacker with a valid token
decides.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("mcpsync")

SMALL_BODY = 64 * 1024
"""Bodies up to this size may use the budget's reserve."""
RETRY_AFTER = 1
"""Seconds a request refused for want of body budget is asked to wait: bodies are read at
network speed and freed as soon as their request is answered."""


class BodyBudget:
    """A count of body bytes held against `limit`, the last `reserve` of them for small bodies
    only; thread-safe."""

    def __init__(self, limit: int, reserve: int = 0) -> None:
        if limit <= 0 or not 0 <= reserve < limit:
            raise ValueError("the body budget must be positive, and its reserve below it")
        self.limit = limit
        self.reserve = reserve
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        return self._held

    def take(self, size: int, body: int) -> bool:
        """Hold `size` more bytes of a body that is then `body` bytes long if they fit under the
        limit (less the reserve, for a body over `SMALL_BODY`); False (holding nothing) if not."""
        limit = self.limit if body <= SMALL_BODY else self.limit - self.reserve
        with self._lock:
            held = self._held
            if held + size <= limit:
                self._held = held + size
                return True
        log.warning("HTTP: request bodies hold %d of the %d bytes they may (max_buffered_bytes); refused one of %d with 503", held, self.limit, body)
        return False

    def give(self, size: int) -> None:
        """Give back `size` bytes taken before."""
        with self._lock:
            self._held -= size
            assert self._held >= 0, "gave back more body budget than was taken"
