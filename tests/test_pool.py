"""WorkerPool: at most `workers` threads, at most `backlog` waiting, refusals at once, bounded close."""

from __future__ import annotations

import threading

from mcpsync import _pool
from mcpsync._pool import WorkerPool

from ._timeouts import LONG


def _pool_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(name + "-")]


def test_jobs_beyond_the_workers_wait_and_beyond_the_backlog_are_refused() -> None:
    pool = WorkerPool("test-pool-bound", workers=2, backlog=3)
    release, started, done = threading.Event(), threading.Semaphore(0), []
    lock = threading.Lock()

    def job(n: int) -> None:
        started.release()
        release.wait(LONG)
        with lock:
            done.append(n)

    try:
        accepted = [pool.submit(lambda n=n: job(n)) for n in range(8)]
        assert accepted == [True] * 5 + [False] * 3
        assert started.acquire(timeout=LONG) and started.acquire(timeout=LONG)
        assert len(_pool_threads("test-pool-bound")) == 2
        release.set()
        for _ in range(3):
            assert started.acquire(timeout=LONG)
    finally:
        release.set()
        assert pool.close(LONG) == []
    assert sorted(done) == [0, 1, 2, 3, 4]
    assert not _pool_threads("test-pool-bound")


def test_close_drops_what_has_not_started_and_refuses_more() -> None:
    pool = WorkerPool("test-pool-close", workers=1, backlog=5)
    running, release, ran = threading.Event(), threading.Event(), []
    pool.submit(lambda: (running.set(), release.wait(LONG), ran.append("first")))
    pool.submit(lambda: ran.append("queued"))
    assert running.wait(LONG)
    closer = threading.Thread(target=pool.close, args=(LONG,), name="test-closer")
    closer.start()
    release.set()
    closer.join(LONG)
    assert ran == ["first"]
    assert pool.submit(lambda: ran.append("late")) is False


def test_close_gives_up_at_its_deadline_and_names_the_survivors() -> None:
    pool = WorkerPool("test-pool-stuck", workers=1, backlog=0)
    running, release = threading.Event(), threading.Event()
    pool.submit(lambda: (running.set(), release.wait(LONG)))
    assert running.wait(LONG)
    try:
        assert pool.close(0.05) == ["test-pool-stuck-1"]
    finally:
        release.set()


def test_a_worker_may_close_its_own_pool() -> None:
    pool = WorkerPool("test-pool-self", workers=1, backlog=0)
    result: list[list[str]] = []
    finished = threading.Event()
    pool.submit(lambda: (result.append(pool.close(LONG)), finished.set()))
    assert finished.wait(LONG)
    assert result == [[]]


def test_idle_workers_end(monkeypatch) -> None:
    monkeypatch.setattr(_pool, "IDLE", 0.05)
    pool = WorkerPool("test-pool-idle", workers=2, backlog=0)
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(LONG)
    for thread in _pool_threads("test-pool-idle"):
        thread.join(LONG)
    assert not _pool_threads("test-pool-idle")
    again = threading.Event()
    assert pool.submit(again.set) and again.wait(LONG)
    pool.close(LONG)
