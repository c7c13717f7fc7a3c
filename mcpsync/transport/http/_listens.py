"""The endpoint's open `subscriptions/listen` streams (2026-07-28): the acknowledgement first,
then the tagged changes each asked for, keep-alive comments, and the `complete` result on
shutdown or when the token it was opened with expires.

Why under the endpoint's lock (`EndpointState.lock`): registering a listen and queueing its
acknowledgement is one critical section that publishing also takes, so no change overtakes its
ack. A listen holds one of the endpoint's streams (`EndpointState.streams`) while it is open;
past `max_streams`, or past the subscription cap, it is refused -32603. Publishing never blocks
on a client: a listen that does not keep up is dropped (its stream ends; the client listens
again and re-lists).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...engine.operations import update_scopes
from ...engine.outcome import Subscribed
from ...protocol import jsonrpc
from ...protocol.jsonrpc import ErrorCode, McpError
from ...protocol.versions import META_SUBSCRIPTION_ID
from ..lifecycle.subscriptions import TASK_STATUS, Subscription, complete_frame, may_be_told, tagged_frame
from ._gate import required_scopes
from ._state import EndpointState
from ._stream import Exchange, Final

if TYPE_CHECKING:
    from ...auth.resource.guard import Auth
    from ...auth.resource.principal import Principal
    from ...engine.engine import Engine

log = logging.getLogger("mcpsync")


class Listens:
    """The listens open on one endpoint, keyed by their exchange; at most `cap` at once."""

    def __init__(self, state: EndpointState, engine: Engine, auth: Auth | None, cap: int) -> None:
        self._state = state
        self._engine = engine
        self._auth = auth
        self._cap = cap
        self._open: dict[Exchange, Subscription] = {}

    def activate(self, exchange: Exchange, outcome: Subscribed, principal: Principal | None) -> None:
        """Register an accepted listen and queue its acknowledgement in one critical section."""
        ack = jsonrpc.encode(
            jsonrpc.notification_frame(
                "notifications/subscriptions/acknowledged",
                {"_meta": {META_SUBSCRIPTION_ID: outcome.request_id}, "notifications": outcome.accepted},
            )
        )
        state = self._state
        with state.lock:
            if exchange.cancel_event.is_set():
                exchange.answer(Final(None))
                return
            if state.closing:  # never leave a listen registered during shutdown
                exchange.answer(Final(self.complete_frame(outcome.request_id)))
                return
            if len(self._open) >= self._cap:
                refusal = McpError(ErrorCode.INTERNAL_ERROR, "Subscription limit reached")
            elif state.streams >= state.max_streams:
                refusal = McpError(ErrorCode.INTERNAL_ERROR, "Subscription limit reached: too many open streams")
            else:
                self._open[exchange] = Subscription(outcome.request_id, outcome.accepted, principal, outcome.stamp)
                state.streams += 1
                exchange.subscribe(ack)
                return
        exchange.answer(Final(jsonrpc.encode(jsonrpc.error_frame(outcome.request_id, refusal))))

    def complete_frame(self, subscription_id: Any) -> bytes:
        return complete_frame(subscription_id, self._engine.server_info)

    def closed(self, exchange: Exchange) -> None:
        """The exchange's stream closed: if it was a listen, it is one no more."""
        with self._state.lock:
            if self._open.pop(exchange, None) is not None:
                self._state.streams -= 1

    def end(self, exchange: Exchange) -> None:
        """The token a listen was opened with has expired: it ends with its `complete` result, as
        at shutdown, and the client listens again with a fresh token (an open stream is no way
        around a token's lifetime)."""
        with self._state.lock:
            subscription = self._open.pop(exchange, None)
            if subscription is not None:
                self._state.streams -= 1
        if subscription is None:  # not acknowledged yet: nothing was promised
            exchange.cancel("the access token expired")
            exchange.answer(Final(None))
            return
        log.info("listen %r ended: its access token expired", subscription.id)
        exchange.channel.finish(Final(self.complete_frame(subscription.id)))

    def tell_list_changed(self, methods: list[tuple[str, str]]) -> None:
        """One tagged copy of each (kind, notification method) to each listen that asked for the kind."""
        with self._state.lock:
            for exchange, subscription in list(self._open.items()):
                for kind, method in methods:
                    if subscription.wants_kind(kind):
                        self._send_tagged(exchange, subscription, method, {})

    def tell_resource_updated(self, uri: str, method: str, params: dict[str, Any]) -> None:
        """A tagged copy to each listen subscribed to `uri` (or to a parent) whose token may read it."""
        needed = update_scopes(self._engine.catalog, uri) if self._auth is not None else None
        required = required_scopes(self._auth)
        with self._state.lock:
            for exchange, subscription in list(self._open.items()):
                if subscription.wants_uri(uri) and may_be_told(subscription.principal, needed, required):
                    self._send_tagged(exchange, subscription, method, params)

    def tell_task_status(self, task_id: str, params: dict[str, Any]) -> None:
        """A tagged `notifications/tasks` to each listen that asked for the task."""
        with self._state.lock:
            for exchange, subscription in list(self._open.items()):
                if subscription.wants_task(task_id):
                    self._send_tagged(exchange, subscription, TASK_STATUS, params)

    def _send_tagged(self, exchange: Exchange, subscription: Subscription, method: str, params: dict[str, Any]) -> None:
        """Under the lock: one tagged notification onto a listen's stream, or drop the listen if
        its client does not keep up (its stream ends; the client listens again and re-lists)."""
        if not exchange.channel.put(tagged_frame(method, subscription, params)):
            log.warning("dropping listen %r: its client does not keep up", subscription.id)
            del self._open[exchange]
            self._state.streams -= 1
            exchange.channel.close()

    def drain(self) -> list[tuple[Exchange, Subscription]]:
        """Every open listen, forgotten (shutdown takes them in the critical section that marks
        the endpoint closing, so none is registered after)."""
        with self._state.lock:
            listens = list(self._open.items())
            self._open.clear()
        return listens

    def complete(self, listens: list[tuple[Exchange, Subscription]]) -> None:
        """End each drained listen with its `complete` result."""
        for exchange, subscription in listens:
            exchange.channel.finish(Final(self.complete_frame(subscription.id)))
