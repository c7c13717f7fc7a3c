"""What serving takes from the process itself: fds 0 and 1, and SIGTERM and SIGINT.

Strategy: the MCP wire over stdio must be the only thing that reaches the client, so serving
takes private duplicates of fds 0 and 1 and points the originals at /dev/null and stderr
(`isolate_stdio`), restored when serving ends; a blocking serve on the main thread turns the two
signals into a graceful shutdown of its transport (`graceful_signals`), and puts the previous
handlers back afterwards. `Server` uses both; nothing here knows MCP.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("mcpsync")


def isolate_stdio() -> StdioWire:
    """Take fds 0 and 1 for the MCP wire: the wire keeps private duplicates, while fd 0 reads
    /dev/null and fd 1 writes to stderr, so nothing else in the process can reach the client."""
    return StdioWire()


class StdioWire:
    """Private duplicates of fds 0 and 1 for the wire; fd 0 → /dev/null and fd 1 → stderr meanwhile."""

    def __init__(self) -> None:
        for stream in (sys.stdout, sys.__stdout__):
            if stream is not None:
                stream.flush()
        self.wire_in = os.dup(0)
        self.wire_out = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(devnull, 0)
            os.dup2(2, 1)
        finally:
            os.close(devnull)
        self._restored = False

    def restore(self) -> None:
        if self._restored:
            return
        self._restored = True
        for stream in (sys.stdout, sys.__stdout__):
            if stream is not None:
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
        os.dup2(self.wire_in, 0)
        os.dup2(self.wire_out, 1)
        os.close(self.wire_in)
        os.close(self.wire_out)


class graceful_signals:
    """SIGTERM and SIGINT ask the transport to shut down (main thread only; restored on exit).

    The kernel may deliver a signal to any thread; Python then runs the handler on the main thread
    only once that thread runs again. So the transport's wake-up pipe is also the signal wake-up fd:
    the signal itself wakes the reader from `poll()`, and the handler runs right after. The
    wake-up fd is a duplicate this holds, with one of the pipe's read end, until the previous one
    is back: the transport closes its pipe when it stops, which is before this exits, and a signal in
    between must find a pipe to write into (else Python prints "Exception ignored when trying to write
    to the signal wakeup fd").
    """

    def __init__(self, transport: Any, on_signal: Callable[[], None] = lambda: None) -> None:
        self._transport = transport
        self._on_signal = on_signal
        self._previous: dict[int, Any] = {}
        self._previous_wakeup: int | None = None
        self._wakeup: tuple[int, int] | None = None  # ours: the transport closes its own when it stops

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._wakeup = self._transport.signal_wakeup()
        self._previous_wakeup = signal.set_wakeup_fd(self._wakeup[0], warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        self._on_signal()
        self._transport.request_shutdown()

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if self._previous_wakeup is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
        if self._wakeup is not None:
            for fd in self._wakeup:
                os.close(fd)
            self._wakeup = None
