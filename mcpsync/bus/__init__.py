"""The bus: how a change made in one process reaches the other processes serving the same MCP server.

Strategy: the transports and the server talk to a four-method protocol (`publish`, `subscribe`,
`on_reconnect`, `close`) and never to a backend; `bus_for(url)` picks the backend from a URL, so a
deployment adds one URL and another backend (NATS, Postgres LISTEN/NOTIFY) can be added later
without touching the transports. `memory://` is the default and today's behaviour: one process,
nobody else to tell. `redis://` and `rediss://` use Redis pub/sub (`RedisBus`, the optional
`mcpsync[redis]` extra, imported only when such a bus is made).

Why these rules:
- No echo. The publisher has already delivered its change to its own listeners, so a bus carries it
  only to the others; delivering it back would notify every local listener twice.
- At most once, and never blocking. A change is a hint ("this list changed"), not data: `publish`
  hands it over and returns; a backend that is down drops and counts it rather than stall a request.
- Level triggers after an outage. What was dropped or missed cannot be replayed, so a backend that
  comes back calls its `on_reconnect` callbacks and the owner re-syncs (every local listener gets a
  `list_changed` for every kind, and re-lists) instead of pretending nothing was missed.
- Handlers run on the bus's own thread (or, for `MemoryBus`, the publisher's): they must be quick
  and never raise; an exception is logged (never the payload) and the bus goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .memory import MemoryBus as MemoryBus
from .memory_store import MemoryStore as MemoryStore
from .redis import RedisBus as RedisBus
from .redis_store import RedisStore as RedisStore
from .store import Creation as Creation
from .store import SessionRecord as SessionRecord
from .store import Store as Store
from .store import StoreUnavailable as StoreUnavailable

if TYPE_CHECKING:
    from .redis_task_store import RedisTaskStore

__all__ = [
    "Bus",
    "Creation",
    "Handler",
    "MemoryBus",
    "MemoryStore",
    "RedisBus",
    "RedisStore",
    "SessionRecord",
    "Store",
    "StoreUnavailable",
    "bus_for",
    "store_for",
    "task_store_for",
]

Handler = Callable[[str, bytes], None]
"""Called with (channel, payload) for each message another bus published on the channel."""

DEFAULT_URL = "memory://"


@runtime_checkable
class Bus(Protocol):
    """What the server and the transports need from a backend."""

    def publish(self, channel: str, payload: bytes) -> None:
        """Hand `payload` to every subscriber of `channel` on every other bus (never this bus's own
        subscribers: no echo). Never blocks for long: a backend queues it for its own thread; while
        the backend is down the message is dropped and counted (logged once per outage)."""
        ...

    def subscribe(self, channel: str, handler: Handler) -> None:
        """Call `handler(channel, payload)` for each message another bus publishes on `channel`, on
        the bus's own thread. The handler must be quick and never raise (exceptions are logged)."""
        ...

    def on_reconnect(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on the bus's thread) each time the backend comes back after messages
        may have been missed, so the owner re-syncs."""
        ...

    @property
    def connected(self) -> bool:
        """Whether the backend is reachable now, so messages published reach the other buses (a
        bus that cannot tell says True). While it is False, a replica trusts no copy of what
        another may have changed and reads the shared store instead."""
        ...

    def close(self, timeout: float = 5.0) -> None:
        """Stop the bus's thread, if it has one, joined within `timeout` seconds; idempotent."""
        ...


def bus_for(url: str) -> Bus:
    """The bus a URL names.

    Args:
        url: `memory://` (in-process: `MemoryBus()`), `redis://HOST:PORT/DB` or `rediss://...`
            (TLS), with redis-py's URL options (user and password, `?socket_timeout=`...).

    Raises:
        ValueError: the URL names no known backend or is malformed (the message never repeats the
            URL, which may hold a password).
        ImportError: a Redis URL without the `redis` package installed (`pip install 'mcpsync[redis]'`).
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme == "memory":
        if rest:
            raise ValueError("memory:// takes no address: the in-memory bus serves one process")
        return MemoryBus()
    if sep and scheme in ("redis", "rediss"):
        return RedisBus(url)
    known = "memory://, redis://HOST:PORT/DB or rediss://HOST:PORT/DB"
    if sep:
        raise ValueError(f"no bus for the URL scheme {scheme!r}: a bus URL is {known}")
    raise ValueError(f"not a bus URL: a bus URL is {known}")


def store_for(url: str) -> Store | None:
    """The store that goes with the bus a URL names: a `RedisStore` on the same Redis for
    `redis://` and `rediss://`; None for `memory://` (one process keeps its own sessions).

    Raises:
        ValueError, ImportError: as `bus_for`.
    """
    scheme = url.partition("://")[0].lower()
    if scheme in ("redis", "rediss"):
        return RedisStore(url)
    bus_for(url).close()  # the same checks, the same errors
    return None


def task_store_for(url: str) -> RedisTaskStore | None:
    """The task store that goes with the bus a URL names: a `RedisTaskStore` on the same Redis for
    `redis://` and `rediss://` (imported here, when first made); None for `memory://` (one process
    keeps its own tasks).

    Raises:
        ValueError, ImportError: as `bus_for`.
    """
    scheme = url.partition("://")[0].lower()
    if scheme in ("redis", "rediss"):
        from .redis_task_store import RedisTaskStore

        return RedisTaskStore(url)
    bus_for(url).close()  # the same checks, the same errors
    return None
