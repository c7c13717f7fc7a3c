"""What the client tests share: sessions opened on the scripted fake server, closed after the test."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

import mcpsync
from mcpsync.client import ClientSession

from .._timeouts import LONG
from .fake_server import command


@pytest.fixture
def open_fake() -> Iterator[Callable[..., ClientSession]]:
    """`open_fake(*flags, **connect_options)`: a session on `fake_server.py FLAGS...` (deadline
    LONG unless given); every session it opened is closed when the test ends."""
    sessions: list[ClientSession] = []

    def open_(*flags: str, **options: Any) -> ClientSession:
        options.setdefault("timeout", LONG)
        session = mcpsync.connect(command(*flags), **options)
        sessions.append(session)
        return session

    yield open_
    for session in sessions:
        session.close()
