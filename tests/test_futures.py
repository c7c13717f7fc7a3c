"""Tests for mcpsync._futures.OneShot: the one-shot answer under every client call and every call
a gateway forwards. Threads meet on the object itself; every wait is bounded."""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from typing import Any

import pytest

from mcpsync._futures import OneShot

from ._timeouts import LONG

pytestmark = pytest.mark.timeout(30)


def test_the_first_settle_wins_and_later_ones_change_nothing() -> None:
    shot = OneShot()
    assert not shot.done()
    assert shot.settle(result={"n": 1})
    assert not shot.settle(error=RuntimeError("late"))
    assert not shot.settle(result={"n": 2})
    assert shot.done() and shot.value() == {"n": 1} and shot.error() is None


def test_an_error_is_raised_by_value() -> None:
    shot = OneShot()
    failure = ValueError("upstream gone")
    shot.settle(error=failure)
    with pytest.raises(ValueError) as raised:
        shot.value()
    assert raised.value is failure and shot.error() is failure


def test_value_before_the_end_is_a_usage_error() -> None:
    with pytest.raises(RuntimeError):
        OneShot().value()


def test_callbacks_run_once_on_the_settling_thread_in_order() -> None:
    shot = OneShot()
    seen: list[tuple[str, Any, Any, str]] = []
    shot.on_done(lambda result, error: seen.append(("first", result, error, threading.current_thread().name)))
    shot.on_done(lambda result, error: seen.append(("second", result, error, threading.current_thread().name)))
    settler = threading.Thread(target=shot.settle, kwargs={"result": 7}, name="settler")
    settler.start()
    settler.join(LONG)
    shot.settle(result=8)
    assert seen == [("first", 7, None, "settler"), ("second", 7, None, "settler")]


def test_a_callback_added_after_the_end_runs_at_once_here() -> None:
    shot = OneShot()
    shot.settle(error=KeyError("x"))
    seen: list[Any] = []
    shot.on_done(lambda result, error: seen.append((result, type(error), threading.current_thread())))
    assert seen == [(None, KeyError, threading.current_thread())]


def test_a_failing_callback_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    shot = OneShot()
    seen: list[int] = []

    def broken(result: Any, error: Any) -> None:
        raise RuntimeError("callback bug")

    shot.on_done(broken)
    shot.on_done(lambda result, error: seen.append(result))
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        assert shot.settle(result=3)
    assert seen == [3]
    assert "callback bug" in caplog.text


def test_wait_returns_at_the_end_or_false_at_the_timeout() -> None:
    shot = OneShot()
    assert shot.wait(0.05) is False
    waiter_saw: list[bool] = []
    waiter = threading.Thread(target=lambda: waiter_saw.append(shot.wait(LONG)))
    waiter.start()
    shot.settle(result=None)
    waiter.join(LONG)
    assert waiter_saw == [True] and shot.value() is None
    assert shot.wait(0) is True


def test_a_callback_that_refers_back_to_its_owner_leaves_no_cycle() -> None:
    """Callbacks are dropped once run: a caller's object that holds the one-shot and is named by
    its callback is freed by reference counting, not left for the collector."""

    class Owner:
        def __init__(self) -> None:
            self.shot = OneShot()
            self.shot.on_done(lambda result, error: self.done(result))

        def done(self, result: Any) -> None:
            self.result = result

    gc.disable()
    try:
        owner = Owner()
        owner.shot.settle(result=1)
        assert owner.result == 1
        alive = weakref.ref(owner)
        del owner
        assert alive() is None, "the owner outlived its last reference: a cycle kept it"
    finally:
        gc.enable()
