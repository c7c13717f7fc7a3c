"""The endpoint's health, for load balancers and orchestrators: a liveness path (the process
serves HTTP at all) and a readiness path (it can serve MCP requests now).

Why apart from the endpoint: a probe is no MCP request. It comes from a load balancer or a
kubelet, which knows neither the Host the endpoint expects nor a token, so no gate applies; it
must be cheap, and it says only "live", "ready" or why not, nothing a caller could use.

Readiness is false while the endpoint is shutting down (so a balancer stops sending before
requests are refused, while the ones in flight finish), and, with replicas sharing a store, while
the store does not answer (a handshake-era request would be answered 503 then; the probe asks it,
one round trip bounded by the store's timeout). A probe answers GET and HEAD; anything else is
405.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ujson

from ._replies import json_reply, status_line

NO_STORE = ("Cache-Control", "no-store")


class Health:
    """Answers the probes at `live_path` and `ready_path` (None: that probe is off); `not_ready()`
    says why the endpoint cannot serve now, or None when it can."""

    def __init__(self, live_path: str | None, ready_path: str | None, not_ready: Callable[[], str | None]) -> None:
        self.live_path = live_path
        self.ready_path = ready_path
        self.paths = frozenset(path for path in (live_path, ready_path) if path is not None)
        self._not_ready = not_ready

    def answer(self, path: str, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if method not in ("GET", "HEAD"):
            start_response(status_line(405), [("Allow", "GET, HEAD"), ("Content-Length", "0")])
            return []
        if path == self.live_path:
            status, state = 200, {"status": "live"}
        else:
            reason = self._not_ready()
            status, state = (200, {"status": "ready"}) if reason is None else (503, {"status": "not ready", "reason": reason})
        reply = json_reply(start_response, status, ujson.dumps(state).encode(), [NO_STORE])
        return [] if method == "HEAD" else reply
