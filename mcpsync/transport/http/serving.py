"""`mcpsync serve --http`: the WSGI transport hosted by mcpsync's own HTTP/1.1 server.

Strategy: `HttpServing` owns one `WsgiServer` (`mcpsync.httpd`), whose accept loop runs on a thread
of its own (`mcpsync-http-server`), and the `WsgiTransport` it serves. Stopping is ordered: the
transport first (listens get their `complete` result, streams end, running requests are
answered), so every connection is free to finish its response, then the server itself. A
connection holds a worker thread only while a request is read, run or written; each open stream
holds its connection (a file descriptor), so `max_connections` must exceed `max_streams`.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Any

from ...httpd.server import DEFAULT_TIMEOUT, WsgiServer
from ..lifecycle.load import Load
from .endpoint import WsgiTransport
from .options import DEFAULT_MAX_CONNECTIONS, DEFAULT_THREADS

log = logging.getLogger("mcpsync")



class HttpServing:
    """A running HTTP server for one `WsgiTransport` (started by `Server.start_http/serve_http`).

    `url` is the endpoint's address (``http://HOST:PORT/PATH``; for port 0, the port it got),
    `host` and `port` where it listens, and `app` the `WsgiTransport` it serves.
    """

    def __init__(
        self,
        app: WsgiTransport,
        host: str,
        port: int,
        *,
        threads: int = DEFAULT_THREADS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_buffered_bytes: int | None = None,
    ) -> None:
        self.app = app
        # binds now: a busy port fails here, in the caller
        self._server = WsgiServer(
            app,
            host,
            port,
            threads=threads,
            max_connections=max_connections,
            timeout=DEFAULT_TIMEOUT,
            max_body_bytes=app.max_body_bytes,
            max_buffered_bytes=max_buffered_bytes,
            head_check=app.check_head,  # authenticated before a byte of the body is read
            answers_at_once=app.answers_at_once,  # run on the loop thread: no hand-off
        )
        self.host, self.port = self._server.host, self._server.port
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{self.port}{app.path}"
        # a daemon: it may run a request (the loop serves quick ones itself), and user code stuck
        # there must not keep the process alive once shutdown has given up on it
        self._thread = threading.Thread(target=self._serve, name="mcpsync-http-server", daemon=True)
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.RLock()  # re-entrant: a signal handler may interrupt its holder
        self._stopping = False
        self._clean = True
        self._wake_r, self._wake_w = os.pipe()  # wakes serve(); also the signal wake-up fd
        for fd in (self._wake_r, self._wake_w):
            os.set_blocking(fd, False)
        self._wake_closed = False
        self._serving = False

    def load(self) -> Load:
        """Its endpoint's requests in flight, open streams and sessions now."""
        return self.app.load()

    def start(self) -> HttpServing:
        with self._lock:
            if not self._thread.is_alive() and self._thread.ident is None:
                self._thread.start()
        return self

    def signal_wakeup(self) -> tuple[int, int]:
        """For `signal.set_wakeup_fd`: duplicates of the wake-up pipe's write end (a signal delivered
        to any thread wakes `serve()`) and of its read end (which keeps the pipe open). The caller
        owns both and closes them once it has put the previous wake-up fd back, so a late signal never
        writes to a closed fd."""
        with self._lock:
            if self._wake_closed:
                raise RuntimeError("this server has stopped")
            return os.dup(self._wake_w), os.dup(self._wake_r)

    def _serve(self) -> None:
        try:
            self._server.serve()
        except Exception:
            log.exception("the HTTP server failed")
        finally:
            self.request_shutdown()

    # -- what the Server calls on each transport -------------------------------------------------
    def publish_list_changed(self, kinds: frozenset[str], origin: str = "local") -> None:
        self.app.publish_list_changed(kinds, origin)

    def publish_resource_updated(self, uri: str, origin: str = "local") -> None:
        self.app.publish_resource_updated(uri, origin)

    def publish_task_status(self, task_id: str, params: dict[str, Any], origin: str = "local") -> None:
        self.app.publish_task_status(task_id, params, origin)

    def request_shutdown(self) -> None:
        """Ask `serve()` to stop; safe from a signal handler and any thread."""
        self._stop_requested.set()
        with self._lock:
            if not self._wake_closed:
                try:
                    os.write(self._wake_w, b"x")
                except OSError:
                    pass  # full: serve() has been woken already

    def serve(self) -> bool:
        """Start (if not yet), block until `request_shutdown()` or `shutdown()`, then stop.
        True if every request finished in time."""
        with self._lock:
            self._serving = True
        try:
            self.start()
            while not self._stop_requested.is_set():
                select.select([self._wake_r], [], [], 3600.0)
                try:
                    while os.read(self._wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            return self.shutdown()
        finally:
            self._close_wake()

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop the transport, then the server, then join its thread. True if every request
        finished in time."""
        with self._lock:
            first = not self._stopping
            self._stopping = True
        if not first:
            return self._stopped.wait((timeout or 5.0) + 5.0) and self._clean
        self.request_shutdown()
        self._clean = self.app.shutdown(timeout)
        if not self._server.stop(timeout=2.0):
            self._clean = False
        if self._thread.is_alive():
            self._thread.join(5.0)
            if self._thread.is_alive():
                log.warning("the HTTP server thread did not stop in time")
                self._clean = False
        if not self._thread.is_alive():
            self._server.close()
        if not self._serving:  # else serve(), which still polls the pipe, closes it
            self._close_wake()
        self._stopped.set()
        return self._clean

    def _close_wake(self) -> None:
        with self._lock:
            if not self._wake_closed:
                self._wake_closed = True
                os.close(self._wake_r)
                os.close(self._wake_w)

    def wait(self, timeout: float) -> bool:
        return self._stopped.wait(timeout)

    def close(self) -> None:
        self.shutdown()

    def __enter__(self) -> HttpServing:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
