"""What a tool, prompt or resource function sees of the request it is serving.

Strategy: a `Context` is built by the engine for one request and handed to the function when it
declares a parameter annotated `Context`. It never touches the wire itself: notifications go through
the `notify` callable the transport supplied, which knows whether the request is still open (no
progress after the response) and where the request's stream is (stdio line, HTTP SSE stream).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from ..protocol.versions import LOG_LEVEL_RANK, Era

log = logging.getLogger("mcpsync")

Notify = Callable[[str, dict[str, Any]], None]
"""Sends one request-scoped notification (`method`, `params`); a no-op once the request is answered."""


class Context:
    """The request a function is serving: progress, logging and cancellation, in either era.

    Attributes:
        request_id: the JSON-RPC id of the request, with its JSON type.
        era: `Era.HANDSHAKE` or `Era.MODERN`.
        protocol_version: the negotiated (handshake) or requested (2026-07-28) version, if known.
        client_info: what the client said about itself, if anything.
        client_capabilities: the capabilities the client declared for this request or connection.
    """

    def __init__(
        self,
        *,
        request_id: Any,
        era: Era,
        protocol_version: str | None,
        client_info: dict[str, Any] | None,
        client_capabilities: dict[str, Any],
        progress_token: Any,
        notify: Notify,
        cancel_event: threading.Event,
        wants_log: Callable[[str], bool],
        on_cancel: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.request_id = request_id
        self.era = era
        self.protocol_version = protocol_version
        self.client_info = client_info
        self.client_capabilities = client_capabilities
        self._progress_token = progress_token
        self._notify = notify
        self._cancel_event = cancel_event
        self._wants_log = wants_log
        self._on_cancel = on_cancel
        self._last_progress: float | None = None
        self._progress_lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request (or the server is shutting down)."""
        return self._cancel_event.is_set()

    @property
    def wants_progress(self) -> bool:
        """True when the client asked for progress (so reporting it is worth the work)."""
        return self._progress_token is not None

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run `callback` (on another thread) as soon as the request is cancelled; at once if it
        already is. For work that cannot poll `cancelled`, such as a call to another server."""
        if self._on_cancel is not None:
            self._on_cancel(callback)
        elif self.cancelled:
            callback()

    def wait_cancelled(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, waking early on cancellation; returns `cancelled`.

        Use this instead of `time.sleep` in a tool that waits, so a cancel ends the wait at once.
        """
        return self._cancel_event.wait(timeout)

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress. Sent only if the client asked (a `progressToken`); values must increase,
        and a value that does not is dropped rather than sent out of order."""
        if self._progress_token is None:
            return
        with self._progress_lock:
            if self._last_progress is not None and progress <= self._last_progress:
                log.debug("dropping non-increasing progress %r after %r", progress, self._last_progress)
                return
            self._last_progress = progress
            params: dict[str, Any] = {"progressToken": self._progress_token, "progress": progress}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            self._notify("notifications/progress", params)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a `notifications/message` to the client, if it asked for this level."""
        if level not in LOG_LEVEL_RANK:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVEL_RANK)}")
        if not self._wants_log(level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._notify("notifications/message", params)

    def debug(self, data: Any) -> None:
        self.log("debug", data)

    def info(self, data: Any) -> None:
        self.log("info", data)

    def warning(self, data: Any) -> None:
        self.log("warning", data)

    def error(self, data: Any) -> None:
        self.log("error", data)
