"""Single-use `requestState`: the retry that carries a state runs its tool once, on any replica.

Strategy: a sealed state proves who asked and what for, and until when; it cannot prove it was not
used already, because the client holds the token and may send it twice (a double click, a retry
after a lost answer, or on purpose), to this process or to another replica. A tool with a one-time
effect (a payment, a booking) opts in (`Tool(single_use_state=True)`, or the engine's setting for
every tool) and the 2026-07-28 MRTR page says the server must then enforce it. So just before such
a tool runs on a retry, the engine *claims* a mark for the state in a store every replica shares:
the first claim wins and the tool runs; every later one, on any replica, is refused -32602 with
`data.reason: "replayed"`.

- The mark is a digest of the token (`claim_key`), never the token: the store never holds what
  would let its reader retry somebody's call. A single-use tool's tokens carry a nonce
  (`RequestStateSealer.seal(..., unique=True)`), so two rounds never share a mark.
- The mark lives as long as the state could still open (`RequestStateSealer.time_left`) plus
  `CLAIM_MARGIN` for the clocks of the replicas, which may differ a little: after that the token
  is refused as expired anyway, so the store forgets nothing it still needs.
- The claim comes after every check that could refuse the retry (seal, principal, expiry, the
  tool's scopes and arguments), so a refused retry leaves its state unused. A state whose tool
  then fails is used all the same: the effect may have happened, and the client starts over.
- A store that cannot answer (`mcpsync.bus.store.StoreUnavailable`, or any `McpsyncError` a claim
  raises) means the tool does not run and the client is told the state could not be checked
  (`RequestStateUnchecked`, -32603): running it could repeat an effect, and "replayed" would be a
  lie the client cannot recover from.

What it does not cover: prompts and resources (only tools have the mark), and a call that carries
`inputResponses` without any `requestState`, which is a new call with nothing to claim (as for
every tool, the answers it brings are the client's word; a tool that must know it asked keeps that
in its own state, `InputRequired(state=...)`, which only a sealed, single-use state brings back).

The default store (`LocalClaims`) is this process's: right for one process, and what an engine
has before `Engine.use_claims` hands it a shared one (`MemoryStore().claim` for replicas in one
process, `RedisStore(...).claim` across processes). This module imports no bus: the engine works
(and `mcpsync serve` starts) without one.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import threading
import time
from collections.abc import Callable

from ..errors import McpsyncError
from ..protocol.jsonrpc import ErrorCode, McpError
from .request_state import REPLAYED, RequestStateError, RequestStateSealer, SealedState, _b64u

__all__ = [
    "CLAIM_MARGIN",
    "UNCHECKED",
    "Claim",
    "ClaimsFull",
    "LocalClaims",
    "RequestStateUnchecked",
    "claim_key",
    "consume",
]

log = logging.getLogger("mcpsync")

Claim = Callable[[str, float], bool]
"""`claim(key, ttl_seconds)`: True for the first claim of `key` within `ttl`, False for every later
one (on every replica sharing the store); raises `StoreUnavailable` when it cannot tell
(`mcpsync.bus.store.Store.claim`)."""

CLAIM_MARGIN = 5.0
"""Seconds a mark outlives its state: replicas' clocks differ a little, and one whose clock is
behind still accepts a token the sealing replica already counts as expired."""

DEFAULT_CAPACITY = 100_000
"""Marks `LocalClaims` keeps at once (about 10 MB): more live single-use states than that in one
process means it refuses to check more (never forgets one that could still be replayed)."""

UNCHECKED = "unchecked"
"""`data.reason` of a retry whose single-use state could not be checked (the store is down)."""

_KEY_PREFIX = "request-state:"  # a store namespaces its keys itself (RedisStore: "mcpsync:claim:")
_KEY_LABEL = b"mcpsync/request-state/used\x00"


class RequestStateUnchecked(McpError):
    """The store of used states could not be asked, so a single-use tool did not run.

    -32603, not -32602: the client's request is fine, and the same retry may succeed once the store
    answers again (a `RequestStateError` says the token will never open). -32603 is what mcpsync
    answers for its own passing failures (a request past its deadline, too many streams, a
    shutdown); an HTTP transport may answer it 503 with `Retry-After`, as for the store's other
    outages."""

    def __init__(self) -> None:
        super().__init__(
            ErrorCode.INTERNAL_ERROR,
            "requestState could not be checked: the store of used states is unreachable; the tool did not run, retry later",
            {"reason": UNCHECKED},
        )
        self.reason = UNCHECKED


class ClaimsFull(McpsyncError):
    """`LocalClaims` holds `capacity` live marks: it cannot take one more without forgetting one
    that could still be replayed, so it says it cannot check (the engine answers
    `RequestStateUnchecked`)."""


class LocalClaims:
    """The marks of used states in this process: a dict of expiries and a heap of them, under a
    lock. Expired marks are dropped from the heap's top on each claim (amortised O(log n)).

    Args:
        capacity: live marks kept at most; past it `claim` raises `ClaimsFull`.
        clock: seconds, monotonic; injected so tests need no sleeps.
    """

    __slots__ = ("_lock", "_until", "_heap", "_capacity", "_clock")

    def __init__(self, *, capacity: int = DEFAULT_CAPACITY, clock: Callable[[], float] = time.monotonic) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._capacity = capacity
        self._clock = clock

    def claim(self, key: str, ttl: float) -> bool:
        """True the first time `key` is claimed within `ttl` seconds, False after (see `Claim`)."""
        with self._lock:
            now = self._clock()
            heap, until = self._heap, self._until
            while heap and heap[0][0] <= now:
                expires, old = heapq.heappop(heap)
                if until.get(old) == expires:
                    del until[old]
            if key in until:
                return False
            if len(until) >= self._capacity:
                raise ClaimsFull(f"{len(until)} single-use requestState marks are live, the most this process keeps")
            until[key] = expires = now + ttl
            heapq.heappush(heap, (expires, key))
            return True

    def __len__(self) -> int:
        """Marks kept (expired ones included until the next claim drops them)."""
        with self._lock:
            return len(self._until)


def claim_key(token: str) -> str:
    """The store key marking `token` used: a labelled SHA-256 of it (never the token itself, which
    the store's readers could use). A token that opened is canonical (its MAC is compared as a
    string), so one state has exactly one key."""
    digest = hashlib.sha256(_KEY_LABEL + token.encode("ascii")).digest()
    return _KEY_PREFIX + _b64u(digest)


def consume(claim: Claim, sealer: RequestStateSealer, token: str, sealed: SealedState) -> None:
    """Mark the opened state `sealed` (the `token` it came from) used, or refuse the retry.

    Raises:
        RequestStateError: "replayed": it was used before, here or on another replica.
        RequestStateUnchecked: the claim raised `McpsyncError` (the store's `StoreUnavailable`,
            `ClaimsFull`): nothing is known, so nothing runs. Any other exception is a bug of the
            claim and propagates (the engine answers -32603 and logs it); the tool does not run
            either way.
    """
    try:
        first = claim(claim_key(token), sealer.time_left(sealed) + CLAIM_MARGIN)
    except McpsyncError as exc:  # its message may name the store's address: only the kind is logged
        log.warning("a single-use requestState could not be checked (%s): its tool did not run", type(exc).__name__)
        raise RequestStateUnchecked() from None
    if not first:
        raise RequestStateError(REPLAYED)
