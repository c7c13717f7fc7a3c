"""The downstream client's roots, for an upstream that asks outside any call (server.py's side).

A `Server` serves a real stdio transport over pipes (tests/transport/pipes.py); the test plays a
handshake-era client that declared `roots`. The upstream is the scripted fake of test_remote.py:
its `roots/list` is the question handler its client session would call, run on a thread of its
own as the session's callback thread would be. Every wait is bounded (tests._timeouts).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcpsync import Server
from mcpsync.gateway.remote import RemoteSource

from .._timeouts import LONG, SHORT
from ..transport.pipes import PipeClient
from .test_remote import FakeConnector, FakeSession, options

pytestmark = pytest.mark.timeout(60)

ROOTS = [{"uri": "file:///home/me/project", "name": "project"}]


def initialize(client: PipeClient, capabilities: dict[str, Any]) -> None:
    params = {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}
    response, _ = client.request("initialize", params, id="init")
    assert "result" in response, response
    client.notify("notifications/initialized")


def ask_roots(source: RemoteSource) -> tuple[threading.Thread, dict[str, Any]]:
    """The upstream asks roots/list outside any call; returns the asking thread and its answer."""
    answer: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: answer.update(source.question_handlers()["roots"]({})), name="test-upstream-asks")
    thread.start()
    return thread, answer


@pytest.fixture
def gateway():
    server = Server("gw")
    session = FakeSession(tools=["a"])
    source = RemoteSource("up", FakeConnector(session), options(), client_roots=server._client_roots)
    server.catalog.add_remote(source)
    client = PipeClient(server)
    try:
        yield server, source, session, client
    finally:
        client.finish()
        server.close()


def test_outside_a_call_the_client_that_declared_roots_is_asked_and_its_answer_relayed(gateway) -> None:
    _, source, session, client = gateway
    initialize(client, {"roots": {"listChanged": True}})
    assert session.roots_told.wait(LONG), "a client with roots arrived: the upstream should re-ask"
    asking, answer = ask_roots(source)
    question = client.recv()
    assert question["method"] == "roots/list" and isinstance(question["id"], str), question
    client.send({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": ROOTS}})
    asking.join(LONG)
    assert not asking.is_alive()
    assert answer == {"roots": ROOTS}


def test_the_clients_roots_list_changed_reaches_the_upstream(gateway) -> None:
    _, _, session, client = gateway
    initialize(client, {"roots": {"listChanged": True}})
    assert session.roots_told.wait(LONG)
    session.roots_told.clear()
    client.notify("notifications/roots/list_changed")
    assert session.roots_told.wait(LONG), "the client's roots/list_changed was not passed on"
    assert session.roots_changes == 2


def test_a_client_without_roots_is_never_asked_and_the_upstream_gets_none(gateway) -> None:
    _, source, session, client = gateway
    initialize(client, {})
    asking, answer = ask_roots(source)
    asking.join(LONG)
    assert not asking.is_alive()
    assert answer == {"roots": []}
    client.expect_silence(SHORT)  # no roots/list went to the client
    assert session.roots_changes == 0
