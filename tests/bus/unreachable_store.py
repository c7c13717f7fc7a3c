"""A shared store whose answers a test turns off (`down = True`): for the readiness probe and the
store gauge, which ask `reachable()`. It fails the one thing they ask; a store that is really away
is Redis stopped (tests/bus/redis_server.py), as integration/test_session_replicas.py does."""

from __future__ import annotations

from mcpsync.bus import MemoryStore


class UnreachableStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def reachable(self) -> bool:
        return not self.down
