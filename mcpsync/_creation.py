"""What a store did with a new record under its caps: shared by the session store (`mcpsync.bus`)
and the task store (`mcpsync.tasks`), so neither layer imports the other to say it."""

from __future__ import annotations

from enum import Enum


class Creation(Enum):
    """What a store did with a new record under its caps (`Store.create_session`,
    `TaskStore.create_task`). Only `CREATED` is true, so `if store.create_session(...)` reads as
    "was it created"."""

    CREATED = "created"
    FULL = "full"
    """`cap` live records exist and none may give way (see `Store.create_session`): the transport
    answers 503 with `Retry-After`."""
    CALLER_FULL = "caller_full"
    """The caller holds as many live records as it may (for sessions: every one used): the transport
    answers 429 with `Retry-After` (the caller's own are in the way, nobody else's)."""

    def __bool__(self) -> bool:
        return self is Creation.CREATED
