"""2026-07-28 `input_required` results as the client sees them: what a round asks, and the
answers its callbacks give (the loop that retries lives in `ClientSession._request_with_input`).

Strategy: pure functions over the result and the session's callbacks, so the rules (which
methods may be asked, what a malformed result is, one deadline across callbacks) are tested
without a connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import CallTimeout, MissingCallback, ProtocolViolation

MAX_INPUT_ROUNDS = 10
"""How many times a call answers `input_required` and retries before giving up (as the SDKs do)."""
STATE_ONLY_FIRST_WAIT, STATE_ONLY_MAX_WAIT = 0.05, 0.25  # a state-only result: wait, doubling
_INPUT_METHODS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
"""The questions an `input_required` result may ask, and the callback that answers each."""


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


def answer_questions(
    handlers: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]], method: str, questions: dict[str, dict[str, Any]], deadline: float, limit: float
) -> dict[str, Any]:
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
