"""What only the garbage collector could free after some requests: the mcpsync objects left in
reference cycles. A request's objects must be freed by reference counting when it ends; a cycle
left behind per request makes a busy server run the collector over all of them on the hot path,
and leaks outright in an application that pauses the collector (`gc.disable()`, `gc.freeze()`)."""

from __future__ import annotations

import gc
from collections.abc import Callable


def our_garbage_after(run: Callable[[], object]) -> list[str]:
    """The type names of the mcpsync objects that only the collector could free after `run()`
    (run with the collector paused)."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        kept = [type(o).__module__ + "." + type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("mcpsync")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return kept
