"""A 2025-11-25 task's questions carried by a `tasks/result` that waits on another replica.

Strategy: in 2025-11-25 a task's question is a request the server sends the client on the stream of
a `tasks/result` waiting for the task. Behind a load balancer that waiting request may reach
replica B while the task runs on replica A, whose function asks. So the `tasks/result` on B
announces itself over the bus (`{"carrier": B}`, again every `ANNOUNCE_EVERY` seconds while it
waits, as the bus may drop a message); A makes B one more carrier of the task, like a local
`tasks/result`: a question goes to B (`{"question": ..., "to": B}`), B asks its client on its own
stream, and the answer (or the client's error) comes back to A (`{"answer": ..., "to": A}`), where
the function waits for it. A carrier that goes away (`{"carrier_gone": B}`), and a question B
could not carry (`"lost"`), put the question back for another carrier, as a local `tasks/result`
that ends does. Nothing waits without a bound: the function's question has its `ask_timeout`, and
B's wait ends with its request.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import McpsyncError
from ..protocol.jsonrpc import ErrorCode, McpError
from .control import Carrier
from .record import TaskRecord

Relay = Callable[[dict[str, Any]], None]
ANNOUNCE_EVERY = 5.0
"""Seconds between two announcements of a `tasks/result` waiting here for a task run elsewhere."""


class CarrierGone(McpsyncError):
    """The `tasks/result` on another replica that was asked to carry a question ended first."""


class _Waiting:
    """A `tasks/result` waiting here for a task another replica runs: the questions sent to it."""

    def __init__(self, carrier: Carrier) -> None:
        self.carrier = carrier
        self.questions: collections.deque[dict[str, Any]] = collections.deque()
        self.changed = threading.Condition()


class RemoteCarriage:
    """Both ends of carrying questions across replicas, for one runner (`replica`)."""

    def __init__(self, replica: str, relay: Callable[[], Relay | None]) -> None:
        self._replica = replica
        self._relay = relay
        self._lock = threading.Lock()
        self._asked: dict[str, concurrent.futures.Future[dict[str, Any]]] = {}  # sent to another replica, by question id
        self._waiting: dict[str, list[_Waiting]] = {}  # by task id

    def _send(self, signal: dict[str, Any]) -> None:
        relay = self._relay()
        if relay is not None:
            relay(signal)

    # -- where the task runs ----------------------------------------------------------------------
    def carrier(self, task_id: str, replica: str) -> Carrier:
        """The carrier a `tasks/result` waiting on `replica` is, for the task's questions here."""

        def ask(method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
            question_id = os.urandom(12).hex()
            future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
            with self._lock:
                self._asked[question_id] = future
            future.add_done_callback(lambda _f: self._forget(question_id))
            question = {"id": question_id, "method": method, "params": params, "from": self._replica}
            self._send({"taskId": task_id, "to": replica, "question": question})
            return future

        return ask

    def _forget(self, question_id: str) -> None:
        with self._lock:
            self._asked.pop(question_id, None)

    def answered(self, answer: dict[str, Any]) -> None:
        """A carrier elsewhere answered (or lost) a question asked from here."""
        with self._lock:
            future = self._asked.pop(str(answer.get("id")), None)
        if future is None or future.done():
            return  # given up on meanwhile (the function's timeout), or a repeat
        error = answer.get("error")
        try:
            if answer.get("lost") is True:
                future.set_exception(CarrierGone("the tasks/result that was to carry the question ended"))
            elif isinstance(error, dict):
                future.set_exception(McpError(error.get("code", ErrorCode.INTERNAL_ERROR), str(error.get("message", "")), error.get("data")))
            else:
                result = answer.get("result")
                future.set_result(result if isinstance(result, dict) else {})
        except concurrent.futures.InvalidStateError:
            pass  # cancelled meanwhile

    # -- where the tasks/result waits ------------------------------------------------------------
    def question(self, task_id: str, question: dict[str, Any]) -> None:
        """A question the task's replica sent to be carried by a `tasks/result` waiting here."""
        with self._lock:
            waiting = list(self._waiting.get(task_id, ()))
        if not waiting:
            self._send({"taskId": task_id, "to": question.get("from"), "answer": {"id": question.get("id"), "lost": True}})
            return
        with waiting[0].changed:
            waiting[0].questions.append(question)
            waiting[0].changed.notify_all()

    def wait(self, record: TaskRecord, carrier: Carrier, reload: Callable[[], TaskRecord], cancelled: Callable[[], bool],
             slice_seconds: float) -> TaskRecord:
        """Wait here for a task running elsewhere to end (`reload` reads its record), carrying the
        questions its replica sends on `carrier`; announce this wait while it lasts."""
        task_id = record.task_id
        waiting = _Waiting(carrier)
        with self._lock:
            self._waiting.setdefault(task_id, []).append(waiting)
        announced = 0.0
        try:
            while not record.terminal and not cancelled():
                now = time.monotonic()
                if now - announced >= ANNOUNCE_EVERY:
                    self._send({"taskId": task_id, "carrier": self._replica})
                    announced = now
                with waiting.changed:
                    if not waiting.questions:
                        waiting.changed.wait(min(slice_seconds, record.poll_interval_ms / 1000))
                    questions = list(waiting.questions)
                    waiting.questions.clear()
                for question in questions:
                    self._carry(task_id, carrier, question)
                record = reload()
            return record
        finally:
            with self._lock:
                left = self._waiting.get(task_id, [])
                left.remove(waiting)
                if not left:
                    self._waiting.pop(task_id, None)
            self._send({"taskId": task_id, "carrier_gone": self._replica})

    def _carry(self, task_id: str, carrier: Carrier, question: dict[str, Any]) -> None:
        back = {"taskId": task_id, "to": question.get("from")}
        method, params = question.get("method"), question.get("params")
        if not isinstance(method, str) or not isinstance(params, dict):
            return
        try:
            sent = carrier(method, params)
        except McpsyncError:
            self._send({**back, "answer": {"id": question.get("id"), "lost": True}})
            return

        def done(finished: concurrent.futures.Future[dict[str, Any]]) -> None:
            answer: dict[str, Any] = {"id": question.get("id")}
            error = None if finished.cancelled() else finished.exception()
            if finished.cancelled() or (error is not None and not isinstance(error, McpError)):
                answer["lost"] = True
            elif isinstance(error, McpError):
                answer["error"] = {"code": error.code, "message": error.message, "data": error.data}
            else:
                answer["result"] = finished.result()
            self._send({**back, "answer": answer})

        sent.add_done_callback(done)
