"""A session's cache of the results a 2026-07-28 server says may be kept (`connect(..., cache=True)`):
lists, pages of lists, and resource reads, each for the `ttlMs` the server gave it, so a script or a
gateway that lists again and again asks once.

What is kept: a `complete` result of a cacheable method (`tools/list`, `prompts/list`,
`resources/list`, `resources/templates/list`, `resources/read`) with a whole `ttlMs` above 0, keyed
by its method and its cursor or URI; never the answer to a request that brought input (a retry),
nor anything of the handshake era (its results have no `ttlMs`). Both scopes are kept: the cache is
this session's, so "private" is this caller's own. What goes: an entry past its time; a list's
entries when the server says the list changed (`notifications/tools/list_changed`, ...), a
resource's when it says it was updated. A server cannot make an entry outlive `MAX_TTL`, nor the
cache hold more than `MAX_ENTRIES` (the oldest go first). Each hit is a copy: a caller that changes
what it got changes nothing kept.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_ENTRIES", "MAX_TTL", "ResponseCache"]

MAX_TTL = 86_400.0
"""Seconds an entry is kept at most, whatever `ttlMs` the server gave."""
MAX_ENTRIES = 1024
LISTS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resources"}
"""Each cached list method, and the kind whose list_changed notification makes it stale."""


class ResponseCache:
    """The kept results of one session (thread-safe); `clock` is `time.monotonic` but in tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str | None], tuple[float, dict[str, Any]]] = OrderedDict()

    def get(self, method: str, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """A copy of the kept result of this request, or None."""
        key = _key(method, params)
        if key is None:
            return None
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            expires, result = found
            if self._clock() >= expires:
                del self._entries[key]
                return None
        return copy.deepcopy(result)

    def put(self, method: str, params: dict[str, Any] | None, result: dict[str, Any]) -> None:
        """Keep `result` if the server said it may be kept (see the module's docstring)."""
        key = _key(method, params)
        ttl = result.get("ttlMs")
        if key is None or result.get("resultType", "complete") != "complete" or isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
            return
        if result.get("cacheScope") not in ("public", "private"):
            return
        expires = self._clock() + min(ttl / 1000, MAX_TTL)
        kept = copy.deepcopy(result)
        with self._lock:
            self._entries[key] = (expires, kept)
            self._entries.move_to_end(key)
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)

    def list_changed(self, kind: str) -> None:
        """The server's list of `kind` (tools, prompts, resources) changed: its pages go."""
        with self._lock:
            for key in [key for key in self._entries if LISTS.get(key[0]) == kind]:
                del self._entries[key]

    def resource_updated(self, uri: str) -> None:
        """The resource at `uri` changed: its read goes."""
        with self._lock:
            self._entries.pop(("resources/read", uri), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _key(method: str, params: dict[str, Any] | None) -> tuple[str, str | None] | None:
    """What a cacheable request is kept under, or None for one that is not kept."""
    params = params or {}
    if "inputResponses" in params or "requestState" in params:
        return None  # a retry's answer is never kept
    if method == "resources/read":
        uri = params.get("uri")
        return (method, uri) if isinstance(uri, str) and set(params) <= {"uri", "_meta"} else None
    if method in LISTS:
        cursor = params.get("cursor")
        return (method, cursor) if (cursor is None or isinstance(cursor, str)) and set(params) <= {"cursor", "_meta"} else None
    return None
