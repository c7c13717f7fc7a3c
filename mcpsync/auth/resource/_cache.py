"""What a verifier already decided about a token, so the next request with it costs a dict lookup.

Strategy: a bounded LRU map from the SHA-256 digest of a token to a value (a `Principal`, or a
refusal a verifier chose to remember) and the time it stops counting. Keying by digest keeps the
tokens themselves out of memory dumps and out of anything that walks the cache; a digest is
32 bytes whatever the token's length, so `size` bounds the memory too.

Every lookup compares the entry's deadline with the verifier's clock (injected, so tests move time
instead of waiting), and an entry past it is dropped and reported missing: the verifier then
checks the token afresh and says why it is refused (expired, say). A verifier sets the deadline no
later than the token's own expiry, so a cached answer never outlives the token. When full, the
least recently used entry goes; expired entries go when they are next looked up, and stale ones
nobody asks for again are pushed out by newer ones.

One lock guards the map; nothing is awaited while it is held, so it is never contended for long.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["TokenCache", "token_digest"]

V = TypeVar("V")


def token_digest(token: str) -> bytes:
    """The SHA-256 digest of `token`: how caches and `StaticTokens` know a token without keeping it."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenCache(Generic[V]):
    """A bounded, expiring, thread-safe map of token digest -> V.

    A `size` of 0 (or less) disables it: `put` keeps nothing and `get` finds nothing.
    """

    __slots__ = ("_size", "_clock", "_lock", "_entries")

    def __init__(self, *, size: int, clock: Callable[[], float]) -> None:
        self._size = size
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, tuple[V, float]] = OrderedDict()

    def get(self, token: str) -> V | None:
        """The value stored for `token`, or None when there is none or its time has passed."""
        if self._size <= 0:
            return None
        digest = token_digest(token)
        now = self._clock()
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                return None
            if now >= entry[1]:
                del self._entries[digest]
                return None
            self._entries.move_to_end(digest)
            return entry[0]

    def put(self, token: str, value: V, until: float) -> None:
        """Remember `value` for `token` until the clock reads `until` (nothing if that is not in the future)."""
        if self._size <= 0 or until <= self._clock():
            return
        digest = token_digest(token)
        with self._lock:
            self._entries[digest] = (value, until)
            self._entries.move_to_end(digest)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def discard(self, token: str) -> None:
        """Forget `token`."""
        with self._lock:
            self._entries.pop(token_digest(token), None)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
