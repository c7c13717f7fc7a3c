"""An in-memory harness for engine tests, in the spirit of h11's `ConnectionPair`.

`EngineHarness` builds a `Catalog` and an `Engine` over some services, owns one `Session` (one
connection) and plays the transport's part without any I/O or thread: each request gets a fresh
`FakeExchange` (its `notify` records the request-scoped notifications; `cancel_event` is a real
`threading.Event`), and after each execution the harness commits the era the way the stdio
transport does once it has written the response: only for a `Success` that `claims` an era, or
for an accepted `subscriptions/listen` (`Subscribed`), whose acknowledgement locks the modern era.

    h = EngineHarness(services=[svc], page_size=2)
    h.initialize("2025-06-18")                      # handshake era, committed
    result = h.ok(h.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    error = h.fails(h.modern("tools/list"), -32600)  # a modern envelope on a handshake connection
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Iterable

from mcpsync.catalog.catalog import Catalog
from mcpsync.catalog.service import Service
from mcpsync.engine.engine import Engine
from mcpsync.engine.interceptors import TransportInfo
from mcpsync.engine.outcome import Failure, Outcome, Subscribed, Success
from mcpsync.engine.session import Session
from mcpsync.protocol.jsonrpc import McpError, Request
from mcpsync.protocol.versions import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    Era,
)

MODERN = "2026-07-28"
LATEST_HANDSHAKE = "2025-11-25"
SERVER_INFO = {"name": "harness", "version": "9.9.9"}
STDIO_LIKE = TransportInfo("stdio-like", supports_subscriptions=True, handshake_push=True)
"""What the stdio transport offers: listen streams and unsolicited handshake-era notifications."""
NO_PUSH = TransportInfo("no-push", supports_subscriptions=False, handshake_push=False)
"""A transport that can deliver nothing unsolicited (e.g. plain request/response HTTP)."""

_UNSET: Any = object()


def envelope(
    version: Any = MODERN,
    *,
    capabilities: Any = _UNSET,
    client_info: Any = _UNSET,
    log_level: Any = _UNSET,
    progress_token: Any = _UNSET,
    **extra: Any,
) -> dict[str, Any]:
    """A 2026-07-28 `_meta` envelope; pass `capabilities=None`-style sentinels to omit keys by
    building the dict yourself, or `extra` for any other key."""
    meta: dict[str, Any] = {META_PROTOCOL_VERSION: version}
    meta[META_CLIENT_CAPABILITIES] = {} if capabilities is _UNSET else capabilities
    meta[META_CLIENT_INFO] = {"name": "harness-client", "version": "1.0"} if client_info is _UNSET else client_info
    if log_level is not _UNSET:
        meta[META_LOG_LEVEL] = log_level
    if progress_token is not _UNSET:
        meta["progressToken"] = progress_token
    meta.update(extra)
    return meta


class FakeExchange:
    """The transport's per-request channel: records notifications, carries the cancel event."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self.cancel_event = threading.Event()

    on_cancel = None  # what this fake cannot do, it says as the engine's `Exchange` lets it: None
    ask = None
    release_stream = None
    trace_headers = None

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))

    def of(self, method: str) -> list[dict[str, Any]]:
        """The params of every recorded notification with this method, in order."""
        return [params for name, params in self.notifications if name == method]


class EngineHarness:
    """One engine, one catalog, one connection (`session`), and a transport played in memory."""

    def __init__(
        self,
        services: Iterable[Service] = (),
        *,
        server_info: dict[str, Any] | None = None,
        transport: TransportInfo = STDIO_LIKE,
        **engine_options: Any,
    ) -> None:
        self.catalog = Catalog(services)
        self.engine = Engine(self.catalog, server_info or dict(SERVER_INFO), **engine_options)
        self.session = Session()
        self.transport = transport
        self.exchange = FakeExchange()  # the last request's exchange
        self._ids = itertools.count(1)

    # -- driving ---------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        id: Any = None,
        commit: bool = True,
        exchange: FakeExchange | None = None,
    ) -> Outcome:
        """Execute one request on this connection; commit its era claim like the transport."""
        self.exchange = exchange if exchange is not None else FakeExchange()
        request_id = next(self._ids) if id is None else id
        request = Request(request_id, method, {} if params is None else params)
        outcome = self.engine.execute(request, self.session, self.exchange, self.transport)
        if commit:
            self.commit(outcome)
        return outcome

    def modern(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        version: Any = MODERN,
        **envelope_options: Any,
    ) -> Outcome:
        """`request()` with the 2026-07-28 `_meta` envelope merged into `params`.

        Keyword options: `id`, `commit`, `exchange` go to `request()`; the rest (`capabilities`,
        `client_info`, `log_level`, `progress_token`, other `_meta` keys) build the envelope.
        """
        request_options = {key: envelope_options.pop(key) for key in ("id", "commit", "exchange") if key in envelope_options}
        params = dict(params or {})
        meta = dict(params.get("_meta") or {})
        meta.update(envelope(version, **envelope_options))
        params["_meta"] = meta
        return self.request(method, params, **request_options)

    def initialize(self, version: Any = LATEST_HANDSHAKE, *, capabilities: Any = None, **options: Any) -> Outcome:
        params: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {} if capabilities is None else capabilities,
            "clientInfo": {"name": "harness-client", "version": "1.0"},
        }
        return self.request("initialize", params, **options)

    def commit(self, outcome: Outcome) -> None:
        """What the transport does once it has written the answer: lock the era a success claims
        (and, for an accepted listen, the modern era once its acknowledgement is written)."""
        if isinstance(outcome, Success) and outcome.claims is not None:
            self.session.commit_era(outcome.claims)
        elif isinstance(outcome, Subscribed):
            self.session.commit_era(Era.MODERN)

    # -- asserting -------------------------------------------------------------------------------
    @staticmethod
    def ok(outcome: Outcome) -> dict[str, Any]:
        """The result of a `Success`; fails the test with the error otherwise."""
        assert isinstance(outcome, Success), f"expected a Success, got {outcome!r}"
        return outcome.result

    @staticmethod
    def fails(outcome: Outcome, code: int) -> McpError:
        """The error of a `Failure` with this code; fails the test otherwise."""
        assert isinstance(outcome, Failure), f"expected a Failure({code}), got {outcome!r}"
        assert outcome.error.code == code, f"expected code {code}, got {outcome.error!r}"
        return outcome.error

    # -- shortcuts -------------------------------------------------------------------------------
    def call_tool(self, name: str, arguments: Any = _UNSET, *, modern: bool = False, **options: Any) -> Outcome:
        params: dict[str, Any] = {"name": name}
        if arguments is not _UNSET:
            params["arguments"] = arguments
        return self.modern("tools/call", params, **options) if modern else self.request("tools/call", params, **options)

    def list_all(self, method: str, key: str, *, modern: bool = False) -> list[dict[str, Any]]:
        """Follow `nextCursor` to the end of a list method; returns every entry."""
        entries: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        for _ in range(1000):
            outcome = self.modern(method, params) if modern else self.request(method, params)
            result = self.ok(outcome)
            entries.extend(result[key])
            if "nextCursor" not in result:
                return entries
            params = {"cursor": result["nextCursor"]}
        raise AssertionError(f"{method} never ended its pagination")
