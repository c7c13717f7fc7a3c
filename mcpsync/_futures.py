"""Settling a `concurrent.futures.Future` from whichever thread has the answer first.

Strategy: an answer can race a cancel or a timeout (the waiter gave up) or a duplicate (a late
response); the first settles the future and the rest are dropped, never raised at the thread
that happened to bring them.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any


def settle(future: "concurrent.futures.Future[Any]", *, result: Any = None, error: BaseException | None = None) -> bool:
    """Resolve (or fail, with `error`) unless already settled or cancelled; True if this did."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        return False
    return True
