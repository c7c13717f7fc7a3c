"""The command line's stderr log handler (`mcpsync._stderr_log`) over real pipes and processes.

What a user would notice: a host that does not read stderr never makes a logging thread wait
(the review test in tests/transport/test_review_writer.py shows the SIGTERM this saves), lines
arrive whole or not at all, the dropped ones are counted in one line, and a forked worker (the
`--processes` mode's gunicorn workers) still logs. Every wait is a read with a deadline, a thread
join or a process wait with a timeout.
"""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mcpsync._stderr_log import FORMAT, PipeHandler, stderr_handler

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING review: line (\d+) (w+)")
NOTICE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING mcpsync: (\d+) log line\(s\) dropped: stderr is not read")
BURST = 300
WIDTH = 1000


def _logger(handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger("review")
    logger.propagate = False
    logger.handlers[:] = [handler]
    logger.setLevel(logging.WARNING)
    return logger


def _burst(logger: logging.Logger) -> None:
    for n in range(BURST):
        logger.warning("line %d %s", n, "w" * WIDTH)


def _read_all(fd: int, into: list[bytes]) -> None:
    while chunk := os.read(fd, 65536):
        into.append(chunk)


def test_a_stderr_nobody_reads_costs_lines_never_a_wait_and_the_loss_is_counted() -> None:
    """300 lines of 1 KB into a pipe of 64 KiB that nobody reads, with a queue of 128 KiB: every
    call returns; once the pipe is read, what it got are whole lines in order, then one line
    counting the dropped ones, then the next line logged."""
    read_end, write_end = os.pipe()
    handler = PipeHandler(write_end, bound=128 * 1024, deadline=LONG)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger = _logger(handler)
    try:
        burst = threading.Thread(target=_burst, args=(logger,), daemon=True)
        burst.start()
        burst.join(LONG)
        assert not burst.is_alive(), "a log call waited on a stderr nobody reads"
        received: list[bytes] = []
        reader = threading.Thread(target=_read_all, args=(read_end, received), daemon=True)
        reader.start()
        handler.flush()  # the queue drains now that the pipe is read
        logger.warning("after")
        handler.close()
    finally:
        logger.handlers[:] = []
        os.close(write_end)
    reader.join(LONG)
    assert not reader.is_alive()
    os.close(read_end)
    lines = b"".join(received).decode().split("\n")
    assert lines[-1] == ""  # ends with a whole line
    assert lines[-2].endswith("WARNING review: after"), lines[-2]
    expected = kept = notices = 0
    for line in lines[:-2]:  # whole lines in order; each run of drops counted where it happened
        dropped = NOTICE.fullmatch(line)
        if dropped is not None:
            expected += int(dropped[1])
            notices += 1
            continue
        match = LINE.fullmatch(line)
        assert match is not None and len(match[2]) == WIDTH, line[:100]
        assert int(match[1]) == expected, line[:100]
        expected += 1
        kept += 1
    assert expected == BURST and 0 < kept < BURST and notices >= 1
    last = LINE.fullmatch(lines[-3])
    if last is None or int(last[1]) != BURST - 1:  # the burst ended in drops (the usual case; a busy reader may keep its end)
        assert NOTICE.fullmatch(lines[-3]), "the count of the last drops precedes the next line"


def test_a_reader_that_keeps_up_loses_nothing() -> None:
    read_end, write_end = os.pipe()
    received: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(read_end, received), daemon=True)
    reader.start()
    handler = PipeHandler(write_end, deadline=LONG)
    logger = _logger(handler)
    try:
        _burst(logger)
        handler.close()
    finally:
        logger.handlers[:] = []
        os.close(write_end)
    reader.join(LONG)
    os.close(read_end)
    text = b"".join(received).decode()
    assert text.splitlines() == [f"line {n} {'w' * WIDTH}" for n in range(BURST)]


FORKING = """
import logging, os, sys
from mcpsync._stderr_log import stderr_handler
root = logging.getLogger()
root.handlers[:] = [stderr_handler()]
logging.warning("parent before")
pid = os.fork()
if pid == 0:
    logging.warning("child")
    logging.shutdown()
    os._exit(0)
os.waitpid(pid, 0)
logging.warning("parent after")
"""


def test_a_forked_worker_logs_through_its_own_writer() -> None:
    """`mcpsync serve --processes` forks gunicorn workers after the handler is made: a worker's
    lines reach stderr (a writer thread does not survive a fork) and the parent's queue is not
    written twice."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, "-c", FORKING], capture_output=True, text=True, env=env, timeout=LONG, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr
    said = [line.rsplit(": ", 1)[-1] for line in run.stderr.splitlines()]
    assert sorted(said) == ["child", "parent after", "parent before"], run.stderr


def test_a_stream_that_cannot_make_a_writer_wait_keeps_a_plain_handler(tmp_path: Path) -> None:
    """A captured stderr (no descriptor) or a regular file: lines are written by the caller, in step."""
    captured = io.StringIO()
    assert type(stderr_handler(captured)) is logging.StreamHandler
    with (tmp_path / "log.txt").open("w") as file:
        assert type(stderr_handler(file)) is logging.StreamHandler
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(os.dup(write_end), "w") as pipe:
            handler = stderr_handler(pipe)
            assert isinstance(handler, PipeHandler)
            handler.close()
    finally:
        os.close(read_end)
        os.close(write_end)
