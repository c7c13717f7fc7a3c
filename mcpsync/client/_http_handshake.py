"""The handshake era's session over Streamable HTTP, as a client keeps it: the `Mcp-Session-Id`
and negotiated version that `initialize` gives (sent on every later request), the session's GET
stream of unsolicited messages, resuming a request's stream that ended before its response (GET
with `Last-Event-ID`, 2025-11-25 polling), and the DELETE that ends the session.

Why apart from the connection: the 2026-07-28 era has none of it; `HttpConnection` posts requests
and reads answers in both eras, and asks this only for the handshake era's headers and streams.
"""

from __future__ import annotations

import http.client
import logging
import re
import threading
from typing import Any, Protocol

from ..errors import ConnectionLost
from ..protocol.sse import SseParser, TooLarge
from ._http_dial import Endpoint, Outgoing
from ._http_headers import merged
from ._http_wire import Aborted, Answer, Exchange, NotAuthorized, Stream, Unreachable, media_type

log = logging.getLogger("mcpsync.client")

MAX_RECONNECTS = 3
"""Consecutive fruitless attempts to resume a stream before giving up."""
_SESSION_ID = re.compile(r"[\x21-\x7e]+")  # what a session id or a version may hold: visible ASCII


class Connection(Protocol):
    """The connection as its handshake session sees it (an `HttpConnection`): where streams are
    registered, read and given up."""

    @property
    def url(self) -> str: ...

    @property
    def sse_read_timeout(self) -> float: ...

    def _register(self, stream: Stream) -> None: ...

    def _release(self, stream: Stream, conn: http.client.HTTPConnection | None) -> None: ...

    def _pump(self, response: Answer, parser: SseParser, exchange: Exchange | None) -> int: ...

    def _lose(self, error: Exception) -> None: ...

    def _stopping(self) -> bool: ...

    def _wait_retry(self, retry_ms: int | None) -> bool: ...


class HandshakeSession:
    """One connection's handshake-era session. Shares the connection's lock: `id` and `version`
    are set under it."""

    def __init__(self, connection: Connection, endpoint: Endpoint, user_headers: dict[str, str], lock: threading.Lock) -> None:
        self._connection = connection
        self._endpoint = endpoint
        self._user_headers = user_headers
        self._lock = lock
        self.id: str | None = None
        self.version: str | None = None
        self._stream: threading.Thread | None = None

    def forget(self) -> None:
        """A new `initialize` is on its way: no session until it answers (the caller holds the lock)."""
        self.id = self.version = None

    def capture(self, response: Answer) -> None:
        """Keep the `Mcp-Session-Id` of a successful answer to `initialize`."""
        session_id = response.getheader("Mcp-Session-Id")
        if session_id is None:
            return
        if not _SESSION_ID.fullmatch(session_id):
            log.warning("%s sent an unusable Mcp-Session-Id %.80r; ignored", self._connection.url, session_id)
            return
        with self._lock:
            self.id = session_id

    def agree(self, result: dict[str, Any]) -> None:
        """Keep the version an `initialize` result names, sent as MCP-Protocol-Version."""
        version = result.get("protocolVersion")
        if isinstance(version, str) and _SESSION_ID.fullmatch(version):
            with self._lock:
                self.version = version

    def headers(self, own: dict[str, str]) -> dict[str, str]:
        """`own` headers with the session's id and version, over the user's."""
        own = dict(own)
        with self._lock:
            session_id, version = self.id, self.version
        if version is not None:
            own["MCP-Protocol-Version"] = version
        if session_id is not None:
            own["Mcp-Session-Id"] = session_id
        return merged(self._user_headers, own)

    # -- the session's GET stream ------------------------------------------------------------------
    def open_stream(self) -> None:
        """Start the GET stream's thread, once (the caller holds the lock, and has checked that
        the connection is neither closed nor lost)."""
        if self._stream is None:
            self._stream = threading.Thread(target=self._run_stream, name="mcpsync-http-stream", daemon=True)
            self._stream.start()

    def join(self, timeout: float) -> list[str]:
        """Wait up to `timeout` seconds for the GET stream's thread; the name of one that is still
        running."""
        with self._lock:
            thread = self._stream
        if thread is None or thread is threading.current_thread():
            return []
        thread.join(timeout)
        return [thread.name] if thread.is_alive() else []

    def _run_stream(self) -> None:
        """Deliver the session's unsolicited messages; reconnect (resuming after the last event
        id) when the server ends the stream, until it refuses, or ends it without sending a byte,
        MAX_RECONNECTS times in a row."""
        connection = self._connection
        url = connection.url
        fruitless, last_id, retry_ms = 0, None, None
        unreachable: Exception | None = None  # why the latest attempt could not connect at all
        try:
            while not connection._stopping():
                extra = {"Accept": "text/event-stream"}
                if last_id is not None:
                    extra["Last-Event-ID"] = last_id
                headers = self.headers(extra)
                session_sent = "Mcp-Session-Id" in headers
                stream = Stream()
                conn = None
                try:
                    connection._register(stream)
                    conn, response = self._endpoint.open(Outgoing("GET", headers, None, stream, connection.sse_read_timeout))
                    if response.status == 405:
                        log.debug("%s offers no GET stream (HTTP 405)", url)
                        return
                    if response.status == 404 and session_sent:
                        connection._lose(ConnectionLost(f"the server at {url} ended the session (HTTP 404): session expired"))
                        return
                    if response.status != 200 or media_type(response) != "text/event-stream":
                        log.debug("%s refused the GET stream: HTTP %d", url, response.status)
                        fruitless += 1
                    else:
                        parser = SseParser(last_event_id=last_id)
                        try:
                            received = connection._pump(response, parser, None)
                        finally:
                            last_id, retry_ms = parser.last_event_id, parser.retry_ms
                        fruitless = 0 if received else fruitless + 1
                    unreachable = None
                except Aborted:
                    return
                except TimeoutError:
                    pass  # silent for sse_read_timeout: reconnect
                except (Unreachable, NotAuthorized, TooLarge, OSError, http.client.HTTPException, ValueError) as exc:
                    log.debug("the GET stream of %s failed: %s", url, exc)
                    fruitless += 1
                    unreachable = exc if isinstance(exc, Unreachable) else None
                finally:
                    connection._release(stream, conn)
                if fruitless >= MAX_RECONNECTS:
                    if unreachable is not None:  # the server itself is gone, not just its stream
                        connection._lose(ConnectionLost(f"the server at {url} went away: {unreachable}"))
                    return
                if connection._wait_retry(retry_ms):
                    return
        except Exception:
            log.exception("the GET stream worker failed")

    # -- a request's stream, resumed -----------------------------------------------------------------
    def resume(self, exchange: Exchange, parser: SseParser | None) -> None:
        """2025-11-25 polling: a request's stream that ended before the response, after the
        server gave an event id, is resumed with GET + Last-Event-ID, a bounded number of times.
        The GET uses the exchange's stream, so cancelling the request still cuts it."""
        connection = self._connection
        attempts = 0
        stream = exchange.stream
        while parser is not None and not (exchange.answered or exchange.modern or stream.aborted) and parser.last_event_id is not None:
            if attempts >= MAX_RECONNECTS or connection._wait_retry(parser.retry_ms):
                return
            attempts += 1
            headers = self.headers({"Accept": "text/event-stream", "Last-Event-ID": parser.last_event_id})
            conn, response = self._endpoint.open(Outgoing("GET", headers, None, stream, connection.sse_read_timeout))
            try:
                if response.status != 200 or media_type(response) != "text/event-stream":
                    log.debug("resuming %s: HTTP %d", exchange.method, response.status)
                    return
                parser = SseParser(last_event_id=parser.last_event_id)
                connection._pump(response, parser, exchange)
            finally:
                with self._lock:
                    stream.sock = None
                conn.close()

    # -- the end -------------------------------------------------------------------------------------
    def end(self, timeout: float) -> None:
        """DELETE the session, within `timeout` seconds; a failure is only logged (the
        connection is closing either way)."""
        url = self._connection.url
        headers = self.headers({})
        stream = Stream()  # not registered: it runs while closing, and bounds itself by timeout
        conn = None
        try:
            conn, response = self._endpoint.open(Outgoing("DELETE", headers, None, stream, timeout, timeout))
            response.read(4096)
            log.debug("DELETE of the session at %s: HTTP %d", url, response.status)
        except (Aborted, Unreachable, NotAuthorized, OSError, http.client.HTTPException, ValueError) as exc:
            log.debug("DELETE of the session at %s failed: %s", url, exc)
        finally:
            if conn is not None:
                conn.close()
