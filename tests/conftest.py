"""Suite-wide guards: no test may leak a thread or let a thread die with an exception."""

from __future__ import annotations

import threading

import pytest

from ._timeouts import LONG


@pytest.fixture(autouse=True)
def no_leaked_threads():
    before = set(threading.enumerate())
    failures: list[str] = []
    previous_hook = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        failures.append(f"{args.thread.name if args.thread else '?'}: {args.exc_type.__name__}: {args.exc_value}")
        previous_hook(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous_hook
    leaked = [t for t in threading.enumerate() if t not in before]
    for thread in leaked:
        thread.join(LONG)
    survivors = [t.name for t in leaked if t.is_alive()]
    assert not survivors, f"threads left running: {survivors}"
    assert not failures, f"threads died with exceptions: {failures}"
