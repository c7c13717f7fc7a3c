"""How long a 2026-07-28 client may keep a result, and who may share it (SEP-2549): `ttlMs` and
`cacheScope` on `server/discover`, the list results and `resources/read`. The server's own
(`Server(ttl_ms=, cache_scope=)`) apply unless a method has its own (`Server(cache_hints=...)`) or a
resource or template has its own (`@service.resource(..., cache=CacheHint(...))`) for its reads.

The handshake era has no such fields: nothing of this is sent there. A caller with a token is
always told "private" (its lists and reads are its own), and so is the answer to a retry that
brought input (never cached at all).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CACHEABLE_METHODS", "CacheHint"]

CACHEABLE_METHODS = frozenset({"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"})
SCOPES = ("public", "private")


@dataclass(frozen=True)
class CacheHint:
    """`ttl_ms` (milliseconds, 0: do not reuse) and `scope` ("private": this caller's own;
    "public": any caller's the same, so a shared cache may keep it).

    Raises:
        ValueError: a negative or non-integer `ttl_ms`, or another scope.
    """

    ttl_ms: int
    scope: str = "private"

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms < 0:
            raise ValueError(f"ttl_ms must be a whole number of milliseconds, 0 or more, not {self.ttl_ms!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"a cache scope is 'public' or 'private', not {self.scope!r}")

    def wire(self) -> dict[str, Any]:
        return {"ttlMs": self.ttl_ms, "cacheScope": self.scope}
