"""The test suite's two waits, defined once.

SHORT: how long to wait for something that must NOT happen (a frame that should never arrive).
LONG: the upper bound for something that must happen; generous so a loaded CI machine never flakes.
"""

import os

SHORT = 0.3
LONG = 20.0 if os.environ.get("CI") else 10.0
