"""HttpOptions: the HTTP endpoint's settings as one value, which the keyword API builds, with the
stream rule written once for mcpsync's own server and for another WSGI server."""

from __future__ import annotations

import dataclasses
import json
import urllib.request

import pytest

from mcpsync import Server, Service
from mcpsync.transport.http.options import DEFAULT_MAX_STREAMS, DEFAULT_SERVED_MAX_STREAMS, HttpOptions

from .._timeouts import LONG

service = Service("options")


@service.tool
def ping() -> str:
    """Answers."""
    return "pong"


def _initialize(url: str) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(request, timeout=LONG) as response:
        return int(response.status)


def test_the_stream_rule_is_one_for_both_kinds_of_server() -> None:
    assert HttpOptions().served_streams() == DEFAULT_SERVED_MAX_STREAMS
    assert HttpOptions(max_connections=100).served_streams() == 80, "four fifths of the connections when fewer"
    assert HttpOptions().wsgi_streams() == DEFAULT_MAX_STREAMS
    assert HttpOptions().wsgi_streams(100) == 80
    assert HttpOptions(max_streams=5).wsgi_streams(100) == 5
    for options in (HttpOptions(max_streams=100, max_connections=100),):
        with pytest.raises(ValueError, match="below max_connections"):
            options.served_streams()
        with pytest.raises(ValueError, match="below max_connections"):
            options.wsgi_streams(100)


def test_threaded_workers_hold_a_thread_per_stream_below_their_connections() -> None:
    worker = HttpOptions(max_connections=100).for_threaded_worker()
    assert (worker.max_streams, worker.subscription_cap) == (80, 80)
    assert worker.for_threaded_worker() == worker, "already a worker's: the same"
    given = HttpOptions(max_connections=100, max_streams=5, subscription_cap=2)
    assert given.for_threaded_worker() == given, "the streams and the cap given stay"
    with pytest.raises(ValueError, match="below max_connections"):
        HttpOptions(max_streams=100, max_connections=100).for_threaded_worker()


def test_options_are_a_frozen_value() -> None:
    options = HttpOptions(path="/x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.path = "/y"  # type: ignore[misc]
    assert dataclasses.replace(options, keepalive=1.0) == HttpOptions(path="/x", keepalive=1.0)


def test_a_server_takes_the_options_value_or_its_fields_as_keywords() -> None:
    with Server("options", services=[service]) as server:
        by_value = server.start_http("127.0.0.1", 0, options=HttpOptions(path="/value", threads=2))
        by_keyword = server.start_http("127.0.0.1", 0, path="/keyword", threads=2)
        over = server.start_http("127.0.0.1", 0, options=HttpOptions(path="/ignored"), path="/over")
        assert by_value.url.endswith("/value") and by_keyword.url.endswith("/keyword") and over.url.endswith("/over")
        assert {_initialize(serving.url) for serving in (by_value, by_keyword, over)} == {200}
        assert server.wsgi_app(options=HttpOptions(path="/app")).path == "/app"
        assert server.shutdown(LONG)


def test_an_unknown_keyword_is_a_type_error_and_a_stream_bound_past_the_connections_a_value_error() -> None:
    with Server("options", services=[service]) as server:
        with pytest.raises(TypeError):
            server.start_http("127.0.0.1", 0, max_stream=3)
        with pytest.raises(ValueError, match="below max_connections"):
            server.start_http("127.0.0.1", 0, max_streams=10, max_connections=10)
