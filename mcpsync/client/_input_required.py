"""2026-07-28 `input_required` results as the client sees them: what a round asks, the answers
its callbacks give, and the loop that sends the request again until the final result.

Strategy: pure functions over the result and the session's callbacks, so the rules (which
methods may be asked, what a malformed result is, one deadline across callbacks) are tested
without a connection; `request_with_input` drives them with the session's `request()`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..errors import CallTimeout, InputRoundsExceeded, MissingCallback, ProtocolViolation
from ..protocol.versions import Era
from ._pending import Progress

MAX_INPUT_ROUNDS = 10
"""How many times a call answers `input_required` and retries before giving up (as the SDKs do)."""
STATE_ONLY_FIRST_WAIT, STATE_ONLY_MAX_WAIT = 0.05, 0.25  # a state-only result: wait, doubling
_INPUT_METHODS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
"""The questions an `input_required` result may ask, and the callback that answers each."""

Handlers = Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]]
"""The session's callbacks, by the method of the question each answers."""


class Session(Protocol):
    """The session as the rounds see it (a `ClientSession`)."""

    timeout: float
    era: Era | None
    max_input_rounds: int

    @property
    def _handlers(self) -> Handlers: ...

    @property
    def _ending(self) -> threading.Event: ...

    def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None, progress: Progress | None = None
    ) -> dict[str, Any]: ...


def parse_input_required(method: str, result: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The questions and the state of an `input_required` result; ProtocolViolation if malformed."""
    questions, state = result.get("inputRequests"), result.get("requestState")
    if questions is None:
        questions = {}
    if not isinstance(questions, dict) or not all(isinstance(q, dict) for q in questions.values()):
        raise ProtocolViolation(f"{method}: inputRequests of an input_required result is not a map of requests")
    for key, question in questions.items():
        if not isinstance(question.get("method"), str) or question["method"] not in _INPUT_METHODS:
            raise ProtocolViolation(f"{method}: input request {key!r} asks for {question.get('method')!r}, which is not a question a server may ask")
        if not isinstance(question.get("params", {}), (dict, type(None))):
            raise ProtocolViolation(f"{method}: the params of input request {key!r} are not an object")
    if state is not None and not isinstance(state, str):
        raise ProtocolViolation(f"{method}: requestState of an input_required result is not a string")
    if not questions and state is None:
        raise ProtocolViolation(f"{method}: an input_required result carries neither inputRequests nor requestState")
    return questions, state


def answer_questions(handlers: Handlers, method: str, questions: dict[str, dict[str, Any]], deadline: float, limit: float) -> dict[str, Any]:
    """One round's `inputResponses`: each question answered by its callback, in order, on
    the caller's thread; the deadline is checked as each callback returns."""
    missing = sorted({_INPUT_METHODS[q["method"]] for q in questions.values() if q["method"] not in handlers})
    if missing:
        raise MissingCallback(
            f"{method}: the server asked for input this session has no callback for "
            f"(no {' or '.join(missing)} callback, so that capability was never declared)"
        )
    answers: dict[str, Any] = {}
    for key, question in questions.items():
        callback = _INPUT_METHODS[question["method"]]
        answer = handlers[question["method"]](question.get("params") or {})
        if not isinstance(answer, dict):
            raise TypeError(f"the {callback} callback returned {type(answer).__name__}, not a result dict")
        answers[key] = answer
        if time.monotonic() >= deadline:
            raise CallTimeout(f"{method} did not complete within {limit} s (the {callback} callback ran past it)")
    return answers


def request_with_input(
    session: Session, method: str, params: dict[str, Any], *, progress: Progress | None = None, timeout: float | None = None
) -> dict[str, Any]:
    """`session.request()`, then answer `input_required` rounds and retry until the final result,
    all within one deadline (see `ClientSession`)."""
    limit = session.timeout if timeout is None else timeout
    deadline = time.monotonic() + limit
    result = session.request(method, params, progress=progress, timeout=timeout)
    rounds, wait = 0, STATE_ONLY_FIRST_WAIT
    while session.era is Era.MODERN and result.get("resultType") == "input_required":
        rounds += 1
        if rounds > session.max_input_rounds:
            raise InputRoundsExceeded(
                f"{method}: the server still asked for input after {session.max_input_rounds} rounds "
                f"(the limit, max_input_rounds={session.max_input_rounds})"
            )
        questions, state = parse_input_required(method, result)
        retry = dict(params)
        if questions:
            wait = STATE_ONLY_FIRST_WAIT
            retry["inputResponses"] = answer_questions(session._handlers, method, questions, deadline, limit)
        else:  # only a requestState: the server asks to be called again a little later
            session._ending.wait(max(0.0, min(wait, deadline - time.monotonic())))
            wait = min(wait * 2, STATE_ONLY_MAX_WAIT)
        if state is not None:
            retry["requestState"] = state
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CallTimeout(f"{method} did not complete within {limit} s ({rounds} input_required round(s))")
        try:
            result = session.request(method, retry, progress=progress, timeout=remaining)
        except CallTimeout as exc:
            raise CallTimeout(f"{method} did not complete within {limit} s ({rounds} input_required round(s))") from exc
    return result
