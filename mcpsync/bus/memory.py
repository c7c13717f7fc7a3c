"""The in-memory bus: the default, for one process.

Strategy: buses made by `peer()` share one network (a list under a lock) and deliver to each other
synchronously, on the publisher's thread; a bus made on its own has no peers, so `publish` reaches
nobody, which is exactly one process's behaviour (the publisher delivered locally already). There
is no thread and nothing to reconnect, so `on_reconnect` callbacks are kept and never called. Peers
exist so that tests can run two servers in one process as if they were two replicas.

Handlers are called outside the network's lock (a handler may publish or subscribe), and an
exception from one is logged without its payload and does not stop the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import Handler

__all__ = ["MemoryBus"]

log = logging.getLogger("mcpsync")


class _Network:
    """The buses that hear each other."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.members: list[MemoryBus] = []


class MemoryBus:
    """An in-process bus: delivers to its peers (`peer()`), or to nobody when alone. No thread."""

    def __init__(self) -> None:
        self._network = _Network()
        self._handlers: dict[str, list[Handler]] = {}
        self._reconnect_callbacks: list[Callable[[], None]] = []
        self._closed = False
        self._network.members.append(self)

    def peer(self) -> MemoryBus:
        """A new bus on this bus's network: each hears what the other publishes."""
        bus = MemoryBus()
        bus._network = self._network
        with self._network.lock:
            self._network.members.append(bus)
        return bus

    def publish(self, channel: str, payload: bytes) -> None:
        """Call, on this thread, every handler the other open peers have for `channel`."""
        with self._network.lock:
            if self._closed:
                return
            handlers = [handler for bus in self._network.members if bus is not self for handler in bus._handlers.get(channel, ())]
        for handler in handlers:
            try:
                handler(channel, payload)
            except Exception:
                log.exception("bus: a handler for channel %r failed", channel)

    def subscribe(self, channel: str, handler: Handler) -> None:
        with self._network.lock:
            self._handlers.setdefault(channel, []).append(handler)

    def on_reconnect(self, callback: Callable[[], None]) -> None:
        """Kept, never called: an in-memory bus never loses a message."""
        with self._network.lock:
            self._reconnect_callbacks.append(callback)

    @property
    def connected(self) -> bool:
        """Always: the peers of an in-memory bus are in this process."""
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Leave the network: this bus neither sends nor receives any more. Idempotent."""
        with self._network.lock:
            self._closed = True
            if self in self._network.members:
                self._network.members.remove(self)
