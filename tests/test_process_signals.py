"""`graceful_signals` and the transports' wake-up pipes: a SIGTERM that arrives after serving ended,
while the handlers are still in place, must find a pipe to write into. The transport closes its own
pipe when it stops, before `graceful_signals` puts the previous wake-up fd back; Python writes a byte
to the wake-up fd from its C signal handler, so a closed fd there was an "Exception ignored when
trying to write to the signal wakeup fd" on stderr (seen in a busy full run of the gateway tests),
and a reused fd number a stray byte in some other file."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import pytest

from mcpsync import Server
from mcpsync._process import graceful_signals

pytestmark = pytest.mark.timeout(60)


def test_a_signal_after_stdio_serving_ended_writes_into_a_pipe_still_open() -> None:
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    os.close(write_in)  # end of input at once: serve() returns, and the transport closes its pipe
    transport = Server("t").serve_fds(read_in, write_out, start=False)
    unraisable: list[Any] = []
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with graceful_signals(transport):
            assert transport.serve()
            os.kill(os.getpid(), signal.SIGTERM)  # the C handler writes the wake-up fd at once
            for _ in range(1000):  # bytecode runs: the Python handler and any pending report with it
                pass
    finally:
        sys.unraisablehook = previous_hook
        for fd in (read_in, read_out, write_out):
            os.close(fd)
    assert unraisable == []


def test_the_http_server_hands_out_its_wake_up_pipe_the_same_way() -> None:
    serving = Server("t").start_http("127.0.0.1", 0)
    write_end, read_end = serving.signal_wakeup()
    try:
        serving.shutdown(5.0)  # closes the server's own ends
        os.write(write_end, b"x")  # still a pipe: the duplicates keep it open
        assert os.read(read_end, 1) == b"x"
    finally:
        os.close(write_end)
        os.close(read_end)
