"""mcpsync.hosting: a Server as its process's whole job, as `mcpsync serve` runs it: served until
it is stopped, then closed; a port that cannot be bound raises after closing it."""

from __future__ import annotations

import socket
import threading

import pytest

from mcpsync import Server, Service
from mcpsync.hosting import run_http
from mcpsync.transport.http.options import HttpOptions

service = Service("hosted")


@service.tool
def ping() -> str:
    """Answers."""
    return "pong"


def _closing(server: Server) -> list[float | None]:
    """Record each close() of `server` (and still close it)."""
    closes: list[float | None] = []
    close = server.close

    def recorded(timeout: float | None = None) -> bool:
        closes.append(timeout)
        return close(timeout)

    server.close = recorded  # type: ignore[method-assign]
    return closes


def test_run_http_serves_until_shutdown_then_closes_the_server() -> None:
    server = Server("hosted", services=[service])
    closes = _closing(server)
    urls: list[str] = []

    def ready(url: str) -> None:
        urls.append(url)
        threading.Thread(target=server.shutdown).start()

    run_http(server, "127.0.0.1", 0, options=HttpOptions(path="/hosted", threads=2), on_ready=ready)
    assert len(urls) == 1 and urls[0].startswith("http://127.0.0.1:") and urls[0].endswith("/hosted")
    assert closes == [0]


def test_a_port_in_use_raises_after_closing_the_server() -> None:
    server = Server("hosted", services=[service])
    closes = _closing(server)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            run_http(server, "127.0.0.1", taken.getsockname()[1], threads=2)
    assert closes == [0]

