"""Tools that say which thread ran them, and tools that hold their thread until the test lets
them go: for the tests of which thread runs a request (tests/transport/test_http_loop_thread.py,
tests/transport/test_stdio_reader_thread.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from mcpsync import Context, Service

from .._timeouts import LONG


class ThreadTools:
    """`where` and `where_with_context` answer their thread's name; `hold` and
    `hold_with_context` set `holding`, then wait for `release` (at most 2 LONG and LONG) and answer theirs;
    `big` answers as many characters as it is asked for."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        service = Service("threads")

        @service.tool
        def where() -> str:
            """The thread that ran this call."""
            return threading.current_thread().name

        @service.tool
        def where_with_context(ctx: Context) -> str:
            """The thread that ran this call, which takes a Context."""
            return threading.current_thread().name

        @service.tool
        def hold() -> str:
            """Promises nothing and waits for the test to let it go (longer than a test waits for
            an answer, so an answer held behind it fails the test rather than arriving late)."""
            self.holding.set()
            self.release.wait(2 * LONG)
            return threading.current_thread().name

        @service.tool
        def hold_with_context(ctx: Context) -> str:
            """Takes a Context (so runs on a worker) and waits for the test to let it go."""
            self.holding.set()
            self.release.wait(LONG)
            return threading.current_thread().name

        @service.tool
        def big(size: int) -> str:
            """Takes no Context and answers `size` characters: a client that does not read them
            leaves the thread writing the answer waiting for room."""
            return "x" * size

        self.service = service


@pytest.fixture
def tools() -> Iterator[ThreadTools]:
    made = ThreadTools()
    yield made
    made.release.set()  # never leave a tool waiting
