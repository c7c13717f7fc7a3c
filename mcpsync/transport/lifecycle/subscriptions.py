"""Open `subscriptions/listen` streams of one connection.

Strategy: a plain registry with no lock of its own: the stdio transport guards it with its output
lock, so registering a subscription and writing its acknowledgement, publishing a change, and
removing a cancelled subscription are each one critical section with the writes they order.
Ids keep their JSON type (`7` and `"7"` are different subscriptions).

Behind `Auth`, a subscription says which updates a caller wants, never which it may have: each
update is told only to a stream whose token may read the updated entry (`may_be_told`), checked
by the transport holding the stream, whatever URI the subscription named (a prefix covers the
URIs under it, `uri_covers`). Stdio has no principals, and every subscriber is told.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ujson

from ...protocol import jsonrpc
from ...protocol.jsonrpc import ErrorCode, McpError
from ...protocol.versions import META_SERVER_INFO, META_SUBSCRIPTION_ID

if TYPE_CHECKING:
    from ...auth.resource.principal import Principal
    from ...engine.outcome import Stamp

LOCAL, REMOTE, RESYNC = "local", "remote", "resync"
"""Where a change comes from, as the transports' `publish_*` methods are told: made in this process
(deliver it to every listener it concerns, on every replica), told by the bus (another replica
made it and delivered it to the shared logs: this process's listeners only), or the level trigger
after a bus outage (every kind, to this process's listeners only)."""

DEFAULT_SUBSCRIPTION_CAP = 1024

KIND_FLAGS = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}


def tagged_frame(method: str, subscription: Subscription, params: dict[str, Any]) -> bytes:
    """A notification for one subscription, tagged with its listen id (never an upstream's tag),
    and with the listen's trace context when it is traced."""
    meta = {META_SUBSCRIPTION_ID: subscription.id}
    if subscription.stamp is not None:
        meta.update(subscription.stamp(method, params))
    return jsonrpc.encode(jsonrpc.notification_frame(method, {**params, "_meta": meta}))


def complete_frame(subscription_id: Any, server_info: dict[str, Any]) -> bytes:
    """The listen's own result, ending it gracefully (shutdown)."""
    meta = {META_SUBSCRIPTION_ID: subscription_id, META_SERVER_INFO: server_info}
    return jsonrpc.encode(jsonrpc.result_frame(subscription_id, {"resultType": "complete", "_meta": meta}))


UPDATED = "notifications/resources/updated"
TASK_STATUS = "notifications/tasks"
"""The 2026-07-28 tasks extension's status notification, told to the listens that asked for the task."""


def updated_uri(frame: bytes) -> str | None:
    """The URI of an encoded `notifications/resources/updated`, or None for any other frame (a
    list change, which every stream is told)."""
    if UPDATED.encode() not in frame:
        return None
    message = ujson.loads(frame)
    if not isinstance(message, dict) or message.get("method") != UPDATED:
        return None
    uri = (message.get("params") or {}).get("uri")
    return uri if isinstance(uri, str) else None


def may_be_told(principal: Principal | None, needed: frozenset[str] | None, required: frozenset[str]) -> bool:
    """Whether a stream opened with `principal`'s token is told of an update whose entry needs
    `needed` (None: no entry answers for its URI), on an endpoint that needs `required`. No
    principal (no `Auth`, stdio): every subscriber is, as before; with one, the token must be
    able to read the entry, and an update of a URI no entry answers for is told to nobody."""
    if principal is None:
        return True
    return needed is not None and principal.scopes.issuperset(needed) and principal.scopes.issuperset(required)


def uri_covers(subscribed: str, uri: str) -> bool:
    """An update for `uri` reaches a subscription to `subscribed` if it is that URI or one under it."""
    if uri == subscribed:
        return True
    prefix = subscribed if subscribed.endswith("/") else subscribed + "/"
    return uri.startswith(prefix)


@dataclass(frozen=True, slots=True)
class Subscription:
    id: Any
    accepted: dict[str, Any]
    principal: Principal | None = None
    """Whose token opened the listen (HTTP with `Auth`): it decides which resource updates the
    listen is told (`may_be_told`). The listen is both the subscription and the stream, and it
    ends when that token expires, so no other token can be the one that counts."""
    stamp: Stamp | None = None
    """What each notification told to it carries in `_meta` (`Subscribed.stamp`: a traced listen's
    context), or None."""

    def wants_kind(self, kind: str) -> bool:
        return self.accepted.get(KIND_FLAGS[kind]) is True

    def wants_uri(self, uri: str) -> bool:
        return any(uri_covers(subscribed, uri) for subscribed in self.accepted.get("resourceSubscriptions", ()))

    def wants_task(self, task_id: str) -> bool:
        """Whether the listen asked for this task's status (2026-07-28 tasks extension; only the
        caller's own tasks were accepted, so no principal is checked again)."""
        return task_id in self.accepted.get("taskIds", ())


class SubscriptionRegistry:
    def __init__(self, cap: int = DEFAULT_SUBSCRIPTION_CAP) -> None:
        self._cap = cap
        self._active: dict[Any, Subscription] = {}

    def __contains__(self, subscription_id: object) -> bool:
        return subscription_id in self._active

    def __len__(self) -> int:
        return len(self._active)

    def add(self, subscription: Subscription) -> None:
        """Register; -32600 for an id already active, -32603 over the cap."""
        if subscription.id in self._active:
            raise McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: a subscription with this id is already active")
        if len(self._active) >= self._cap:
            raise McpError(ErrorCode.INTERNAL_ERROR, "Subscription limit reached")
        self._active[subscription.id] = subscription

    def remove(self, subscription_id: Any) -> bool:
        return self._active.pop(subscription_id, None) is not None

    def for_kind(self, kind: str) -> Iterator[Subscription]:
        return (s for s in self._active.values() if s.wants_kind(kind))

    def for_uri(self, uri: str) -> Iterator[Subscription]:
        return (s for s in self._active.values() if s.wants_uri(uri))

    def for_task(self, task_id: str) -> Iterator[Subscription]:
        return (s for s in self._active.values() if s.wants_task(task_id))

    def drain(self) -> list[Subscription]:
        """Remove and return every subscription (shutdown)."""
        active = list(self._active.values())
        self._active.clear()
        return active
