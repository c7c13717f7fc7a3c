"""Tests for mcpsync.engine.session: the era lock, the one initialize, the log threshold.

The session is shared by the reader thread and the workers, so the one concurrency test here
starts threads (gated by a Barrier, never a sleep) to check that exactly one `initialize` wins.
"""

from __future__ import annotations

import threading

import pytest

from mcpsync.engine.session import Session
from mcpsync.protocol.versions import LOG_LEVELS, Era
from tests._timeouts import LONG

pytestmark = pytest.mark.timeout(30)


def test_a_new_session_is_unlocked_and_uninitialized() -> None:
    session = Session()
    assert session.era is None
    assert session.initialized is False
    assert session.negotiated_version is None
    assert session.client_capabilities == {}
    assert session.client_info is None
    assert session.resource_subscriptions() == frozenset()


@pytest.mark.parametrize("first, second", [
    (Era.HANDSHAKE, Era.MODERN),
    (Era.MODERN, Era.HANDSHAKE),
    (Era.HANDSHAKE, Era.HANDSHAKE),
    (Era.MODERN, Era.MODERN),
])
def test_the_first_committed_era_wins_for_the_connections_lifetime(first: Era, second: Era) -> None:
    session = Session()
    session.commit_era(first)
    session.commit_era(second)
    assert session.era is first


def test_committing_the_handshake_era_opens_the_notification_gate() -> None:
    session = Session()
    session.commit_era(Era.HANDSHAKE)
    assert session.initialized is True


def test_a_modern_connection_never_opens_the_untagged_notification_gate() -> None:
    session = Session()
    session.commit_era(Era.MODERN)
    session.commit_era(Era.HANDSHAKE)  # a late initialize success cannot reopen it
    assert session.initialized is False


def test_initialize_can_be_claimed_once() -> None:
    session = Session()
    assert session.claim_initialize() is True
    assert session.claim_initialize() is False
    assert session.claim_initialize() is False


def test_a_released_initialize_can_be_claimed_again() -> None:
    session = Session()
    assert session.claim_initialize()
    session.release_initialize()
    assert session.claim_initialize()


def test_exactly_one_of_many_concurrent_initializes_wins() -> None:
    session = Session()
    contenders = 16
    barrier = threading.Barrier(contenders)
    results: list[bool] = []
    lock = threading.Lock()

    def contend() -> None:
        barrier.wait(LONG)
        won = session.claim_initialize()
        with lock:
            results.append(won)

    threads = [threading.Thread(target=contend, name=f"contender-{i}") for i in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    assert not any(thread.is_alive() for thread in threads)
    assert sorted(results) == [False] * (contenders - 1) + [True]


def test_every_level_is_wanted_before_any_set_level() -> None:
    session = Session()
    assert all(session.wants_log(level) for level in LOG_LEVELS)


@pytest.mark.parametrize("threshold", LOG_LEVELS)
def test_set_log_level_keeps_that_level_and_above(threshold: str) -> None:
    session = Session()
    session.set_log_level(threshold)
    wanted = [level for level in LOG_LEVELS if session.wants_log(level)]
    assert wanted == list(LOG_LEVELS[LOG_LEVELS.index(threshold):])


def test_set_log_level_with_an_unknown_level_raises() -> None:
    with pytest.raises(KeyError):
        Session().set_log_level("verbose")


def test_resource_subscriptions_are_a_set_of_uris() -> None:
    session = Session()
    session.subscribe_resource("mem://a")
    session.subscribe_resource("mem://a")
    session.subscribe_resource("mem://b")
    assert session.resource_subscriptions() == {"mem://a", "mem://b"}
    session.unsubscribe_resource("mem://a")
    session.unsubscribe_resource("mem://never")
    assert session.resource_subscriptions() == {"mem://b"}


def test_resource_subscriptions_are_a_snapshot() -> None:
    session = Session()
    session.subscribe_resource("mem://a")
    snapshot = session.resource_subscriptions()
    session.subscribe_resource("mem://b")
    assert snapshot == {"mem://a"}
