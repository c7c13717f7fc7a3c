"""The probes a load balancer or an orchestrator sends: `/livez` and `/readyz` answer without a
token and whatever the Host (the balancer knows neither), GET and HEAD only, uncached; readiness
turns 503 with its reason once shutdown begins, and while the replicas' store does not answer;
either path can be moved or turned off, and never shadows the endpoint."""

from __future__ import annotations

import http.client
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync import HttpServing, Server, Service
from mcpsync.auth import Auth, StaticTokens
from mcpsync.bus import MemoryBus
from mcpsync.transport.http.options import HttpOptions

from ..bus.unreachable_store import UnreachableStore

pytestmark = pytest.mark.timeout(60)


def _service() -> Service:
    service = Service("probed")

    @service.tool
    def echo(text: str) -> str:
        """Says it back."""
        return text

    return service


def _port(serving: HttpServing) -> int:
    return int(serving.url.rsplit(":", 1)[1].split("/")[0])


def _probe(serving: HttpServing, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", _port(serving), timeout=10)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, {name.lower(): value for name, value in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.fixture
def serving() -> Iterator[HttpServing]:
    auth = Auth(StaticTokens({"a-secret-of-sixteen-chars": {"sub": "ada"}}), resource="https://mcp.example.com/mcp")
    serving = Server("probed", services=[_service()], auth=auth).start_http("127.0.0.1", 0)
    yield serving
    serving.shutdown()


def test_live_and_ready_answer_without_a_token_and_whatever_the_host(serving: HttpServing) -> None:
    assert _probe(serving, "/mcp", "POST", {"Content-Type": "application/json"})[0] == 401  # the endpoint wants a token
    for path, state in (("/livez", {"status": "live"}), ("/readyz", {"status": "ready"})):
        status, headers, body = _probe(serving, path, headers={"Host": "10.1.2.3:8080"})  # a balancer's Host
        assert (status, json.loads(body)) == (200, state)
        assert headers["cache-control"] == "no-store" and headers["content-type"] == "application/json"


def test_a_probe_takes_get_and_head_only(serving: HttpServing) -> None:
    status, headers, body = _probe(serving, "/readyz", "HEAD")
    assert (status, body) == (200, b"")
    status, headers, body = _probe(serving, "/livez", "DELETE")
    assert (status, headers["allow"]) == (405, "GET, HEAD")


def test_the_paths_can_move_or_be_turned_off() -> None:
    options = HttpOptions(live_path="/health/live", ready_path=None)
    serving = Server("probed", services=[_service()]).start_http("127.0.0.1", 0, options=options)
    try:
        assert _probe(serving, "/health/live")[0] == 200
        assert _probe(serving, "/readyz")[0] == 404
        assert _probe(serving, "/livez")[0] == 404
    finally:
        serving.shutdown()


@pytest.mark.parametrize("options", [HttpOptions(live_path="/mcp"), HttpOptions(ready_path="/mcp/"), HttpOptions(live_path="/x", ready_path="/x")])
def test_a_probe_never_shadows_the_endpoint_or_the_other_probe(options: HttpOptions) -> None:
    with pytest.raises(ValueError, match="must differ"):
        Server("probed").wsgi_app(options=options)


def _wsgi_probe(app: Any, path: str) -> tuple[str, dict[str, Any]]:
    """The app called as any WSGI server calls it (gunicorn, cheroot): no socket of mcpsync's."""
    answered: list[str] = []
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "SERVER_NAME": "10.1.2.3", "SERVER_PORT": "80", "HTTP_HOST": "10.1.2.3",
               "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http"}
    body = b"".join(app(environ, lambda status, headers, exc_info=None: answered.append(status)))
    return answered[0], json.loads(body)


def test_readiness_is_503_once_shutdown_begins_under_any_wsgi_server() -> None:
    app = Server("probed", services=[_service()]).wsgi_app()
    assert _wsgi_probe(app, "/readyz") == ("200 OK", {"status": "ready"})
    assert app.shutdown(timeout=5)
    assert _wsgi_probe(app, "/readyz") == ("503 Service Unavailable", {"status": "not ready", "reason": "shutting down"})
    assert _wsgi_probe(app, "/livez") == ("200 OK", {"status": "live"})  # alive while it drains


def test_readiness_follows_the_shared_store() -> None:
    store = UnreachableStore()
    server = Server("probed", services=[_service()], bus=MemoryBus(), store=store)
    serving = server.start_http("127.0.0.1", 0)
    try:
        assert _probe(serving, "/readyz")[0] == 200
        store.down = True
        status, _, body = _probe(serving, "/readyz")
        assert (status, json.loads(body)) == (503, {"status": "not ready", "reason": "the session store is unreachable"})
        assert _probe(serving, "/livez")[0] == 200
        store.down = False
        assert _probe(serving, "/readyz")[0] == 200
    finally:
        serving.shutdown()
        server.close()
