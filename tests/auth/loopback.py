"""An HTTP server on 127.0.0.1 that one thread of its own serves, for the test peers (the
authority's JWKS and introspection, the OAuth authorization server, the resource metadata).

Why one: each needs the same lifetime (a port chosen by the kernel, a thread that a socketpair
wakes to stop, joined within a bound, the server closed after) and only differs in what it
answers, which its handler says.
"""

from __future__ import annotations

import selectors
import socket
import threading
from http.server import HTTPServer
from typing import Any

from .._timeouts import LONG


class LoopbackServer:
    """Subclasses make their `HTTPServer` in `start()` and hand it to `_run`."""

    _server: HTTPServer | None = None
    _thread: threading.Thread | None = None

    def _run(self, server: HTTPServer, name: str) -> None:
        self._server = server
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name=name)
        self._thread.start()

    def _serve(self) -> None:
        assert self._server is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._server.socket, selectors.EVENT_READ, "accept")
            selector.register(self._wake_r, selectors.EVENT_READ, "wake")
            while True:
                for key, _ in selector.select(timeout=LONG):
                    if key.data == "wake":
                        return
                    self._server.handle_request()

    def stop(self) -> None:
        if self._server is None:
            return
        self._wake_w.send(b"x")
        assert self._thread is not None
        self._thread.join(LONG)
        alive = self._thread.is_alive()
        self._server.server_close()
        self._server = None
        self._wake_r.close()
        self._wake_w.close()
        assert not alive, f"the thread of {type(self).__name__} did not stop"

    def start(self) -> Any:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, f"start the {type(self).__name__} first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"
