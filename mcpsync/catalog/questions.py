"""What a function may ask the client while it runs: the user (elicitation), the client's model
(sampling) or the client's roots, and the answers, checked.

Strategy: a `Question` is plain data (a method, its params, a key) made without any I/O, so the
same question travels either way: as a JSON-RPC request on a handshake-era connection, or inside
an `input_required` result in 2026-07-28, where its `key` names it in `inputRequests` and the
client's `inputResponses`. A question left without a key gets one from the order of asking
(`elicitation-1`, `sampling-1`, `roots-1`, ...), which is the same on every run of the handler, so
the retry of a 2026-07-28 request finds its answers again.

Everything here is pure: which capability a question needs (`missing_capability`), its params as
a handshake-era request (`request_params`) or a 2026-07-28 input request (`input_request`), and
whether an answer has the shape its method promises (`checked_answer`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..protocol.jsonrpc import ErrorCode, McpError
from ..protocol.versions import version_at_least

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
ROOTS = "roots/list"
KINDS = {ELICIT: "elicitation", SAMPLE: "sampling", ROOTS: "roots"}

DEFAULT_ASK_TIMEOUT = 300.0
"""Seconds a handshake-era question waits for the client's answer (a person may be typing)."""


@dataclass(frozen=True, slots=True)
class Question:
    """One thing to ask the client. Build it with `Question.elicitation`, `.elicitation_url`,
    `.sampling` or `.roots`, and pass it to `Context.ask`."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)
    key: str | None = None

    @classmethod
    def elicitation(cls, message: str, schema: Mapping[str, Any] | None = None, *, key: str | None = None) -> Question:
        """A form for the user: `schema` is a flat JSON Schema object of strings, numbers,
        booleans and enums (none: an empty form, a plain confirmation)."""
        schema = dict(schema) if schema is not None else {"type": "object", "properties": {}}
        return cls(ELICIT, {"message": message, "requestedSchema": schema}, key)

    @classmethod
    def elicitation_url(cls, message: str, url: str, *, key: str | None = None, elicitation_id: str | None = None) -> Question:
        """Send the user to `url` (sign-in, payment: what must not pass through the client).
        `elicitation_id`: the handshake era's id of this elicitation (a fresh one if None), which
        `Context.elicitation_complete` names when the flow at `url` is done."""
        params = {"mode": "url", "message": message, "url": url}
        if elicitation_id is not None:
            params["elicitationId"] = elicitation_id
        return cls(ELICIT, params, key)

    @classmethod
    def sampling(
        cls,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: Sequence[str] | None = None,
        model_preferences: Mapping[str, Any] | None = None,
        include_context: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] | None = None,
        tool_choice: str | None = None,
        key: str | None = None,
    ) -> Question:
        """A completion from the client's model; a `str` is one user message. `tools` (mcpsync
        `Tool`s, or tool definitions as `tools/list` gives them) are tools the model may ask to
        use, and `tool_choice` ("auto", "required", "none") whether it must: the answer's content
        may then hold `tool_use` blocks, whose results the next question's messages carry as
        `tool_result` blocks (MCP 2025-11-25; the client must declare `sampling.tools`).

        Raises:
            ValueError: a `tool_choice` other than those three, or a tool that is neither a
                `Tool` nor a definition with a name and an input schema.
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: dict[str, Any] = {"messages": [dict(m) for m in messages], "maxTokens": max_tokens}
        if tools is not None:
            params["tools"] = [_tool_definition(tool) for tool in tools]
        if tool_choice is not None:
            if tool_choice not in ("auto", "required", "none"):
                raise ValueError(f"tool_choice must be 'auto', 'required' or 'none', not {tool_choice!r}")
            params["toolChoice"] = {"mode": tool_choice}
        for name, value in (
            ("systemPrompt", system_prompt),
            ("temperature", temperature),
            ("stopSequences", list(stop_sequences) if stop_sequences is not None else None),
            ("modelPreferences", dict(model_preferences) if model_preferences is not None else None),
            ("includeContext", include_context),
            ("metadata", dict(metadata) if metadata is not None else None),
        ):
            if value is not None:
                params[name] = value
        return cls(SAMPLE, params, key)

    @classmethod
    def roots(cls, *, key: str | None = None) -> Question:
        """The client's roots (the directories or files it lets the server work on)."""
        return cls(ROOTS, {}, key)

    def keyed(self, key: str) -> Question:
        return Question(self.method, self.params, key)


def _tool_definition(tool: Any) -> dict[str, Any]:
    """A tool the model may use, as the request carries it: a `Tool`'s definition, or a given one."""
    definition = tool.definition() if callable(getattr(tool, "definition", None)) else tool
    if not isinstance(definition, Mapping) or not isinstance(definition.get("name"), str) or not isinstance(definition.get("inputSchema"), Mapping):
        raise ValueError(f"a sampling tool must be a Tool or a definition with a name and an inputSchema, not {type(tool).__name__}")
    return dict(definition)


def key_of(question: Question) -> str:
    """The key of a question being asked: every one is keyed first (`Context.keyed`, or the
    gateway's own keys), so a question without a key here is a bug in mcpsync."""
    if question.key is None:
        raise AssertionError(f"a {question.method} question is being asked without a key")
    return question.key


class KeyAssigner:
    """Keys for questions asked without one, in asking order: `elicitation-1`, `sampling-1`, ..."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def key_for(self, question: Question) -> Question:
        if question.key is not None:
            return question
        kind = KINDS[question.method]
        self._counts[kind] = self._counts.get(kind, 0) + 1
        return question.keyed(f"{kind}-{self._counts[kind]}")


def missing_capability(question: Question, declared: Mapping[str, Any], protocol_version: str | None) -> McpError | None:
    """-32021 naming what the client would have to declare to be asked this, or None."""
    required: dict[str, Any] | None = None
    what = ""
    if question.method == ELICIT:
        url = question.params.get("mode") == "url"
        elicitation = declared.get("elicitation")
        if not isinstance(elicitation, dict):
            required, what = {"elicitation": {"url": {}} if url else {}}, "elicitation"
        elif url and "url" not in elicitation:
            required, what = {"elicitation": {"url": {}}}, "URL-mode elicitation"
        elif not url and elicitation and "form" not in elicitation:  # {} means form only
            required, what = {"elicitation": {"form": {}}}, "form-mode elicitation"
        elif protocol_version is not None and not version_at_least(protocol_version, "2025-11-25" if url else "2025-06-18"):
            return McpError(
                ErrorCode.MISSING_CLIENT_CAPABILITY,
                f"{'URL-mode ' if url else ''}elicitation needs protocol {'2025-11-25' if url else '2025-06-18'} or later; "
                f"this client speaks {protocol_version}",
                {"requiredCapabilities": {"elicitation": {"url": {}} if url else {}}},
            )
    elif question.method == SAMPLE:
        sampling = declared.get("sampling")
        if not isinstance(sampling, dict):
            required, what = {"sampling": {}}, "sampling"
        elif "tools" in question.params and "tools" not in sampling:
            required, what = {"sampling": {"tools": {}}}, "sampling with tools"
    elif question.method == ROOTS and not isinstance(declared.get("roots"), dict):
        required, what = {"roots": {}}, "roots"
    if required is None:
        return None
    return McpError(
        ErrorCode.MISSING_CLIENT_CAPABILITY,
        f"this needs the client capability {what}, which the client did not declare",
        {"requiredCapabilities": required},
    )


def request_params(question: Question) -> dict[str, Any]:
    """The question's params as a handshake-era request: a URL-mode elicitation (2025-11-25)
    carries an `elicitationId` there (2026-07-28 has none)."""
    params = dict(question.params)
    if question.method == ELICIT and params.get("mode") == "url":
        params.setdefault("elicitationId", os.urandom(16).hex())  # a relayed question keeps its upstream's
    return params


class NeedAnswers(BaseException):
    """Unwinds a 2026-07-28 handler at the first question it cannot go on without: the engine
    answers `input_required` with `questions` (every unanswered one asked so far) and `state`.

    A BaseException, so the handler's own `except Exception` does not swallow it."""

    def __init__(self, questions: Sequence[Question], state: Any = None) -> None:
        super().__init__(f"{len(questions)} question(s) for the client")
        self.questions = tuple(questions)
        self.state = state


@dataclass(frozen=True, slots=True)
class InputRequired:
    """Return this from a tool function to end this round without a result:
    the client is asked `questions` (maybe none) and retries, and on the retry `ctx.state` is
    `state` (any JSON value; sealed, so the client cannot change it, but it can read it).

    For work that must wait (load shedding, a long job: return a state naming the job and check it
    on the retry). In 2026-07-28 this is an `input_required` result; on a handshake-era connection
    the questions are asked directly and the function runs again at once with the answers."""

    questions: Sequence[Question] = ()
    state: Any = None


def input_request(question: Question) -> dict[str, Any]:
    """The question as an entry of a 2026-07-28 `inputRequests` map: `{method, params}` only."""
    entry: dict[str, Any] = {"method": question.method}
    if question.params or question.method != ROOTS:
        entry["params"] = {key: value for key, value in question.params.items() if key != "elicitationId"}  # 2026-07-28 has none
    return entry


def checked_answer(question: Question, answer: Any) -> Any:
    """The client's answer if it has the shape the method promises, else -32602 naming the key.
    Elicitation gives the ElicitResult dict, sampling the CreateMessageResult dict, roots the list."""
    problem = _answer_problem(question.method, answer)
    if problem is not None:
        raise McpError(ErrorCode.INVALID_PARAMS, f"the answer to {question.key or question.method} is not valid: {problem}", {"key": question.key})
    return answer["roots"] if question.method == ROOTS else answer


def _answer_problem(method: str, answer: Any) -> str | None:
    if not isinstance(answer, dict):
        return "it is not an object"
    if method == ELICIT:
        if answer.get("action") not in ("accept", "decline", "cancel"):
            return "action must be accept, decline or cancel"
        if "content" in answer and answer["content"] is not None and not isinstance(answer["content"], dict):
            return "content must be an object"
    elif method == SAMPLE:
        if answer.get("role") not in ("user", "assistant"):
            return "role must be user or assistant"
        if not isinstance(answer.get("content"), (dict, list)):
            return "content must be a content block"
        if not isinstance(answer.get("model"), str):
            return "model must be a string"
    elif method == ROOTS:
        roots = answer.get("roots")
        if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots):
            return "roots must be a list of objects with a uri"
    return None
