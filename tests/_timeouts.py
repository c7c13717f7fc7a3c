"""The test suite's two waits, defined once, and the one way to wait for a state to be reached.

SHORT: how long to wait for something that must NOT happen (a frame that should never arrive).
LONG: the upper bound for something that must happen; generous so a loaded CI machine never flakes.
"""

import os
import time
from collections.abc import Callable

SHORT = 0.3
LONG = 20.0 if os.environ.get("CI") else 10.0


def wait_until(done: Callable[[], bool]) -> None:
    """Until `done()`, for a state that settles a moment after what the test can wait on (a
    worker's bookkeeping after its answer was written); fails past LONG."""
    deadline = time.monotonic() + LONG
    while not done():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.02)
