"""What a tool, prompt or resource function sees of the request it is serving.

Strategy: a `Context` is built by the engine for one request and handed to the function when it
declares a parameter annotated `Context`. It never touches the wire itself: notifications go through
the `notify` callable the transport supplied, which knows whether the request is still open (no
progress after the response) and where the request's stream is (stdio line, HTTP SSE stream).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..auth.resource.principal import Principal
from ..errors import McpsyncError
from ..protocol.jsonrpc import McpError
from ..protocol.versions import LOG_LEVEL_RANK, Era
from .questions import (
    DEFAULT_ASK_TIMEOUT,
    KeyAssigner,
    NeedAnswers,
    Question,
    checked_answer,
    input_request,
    key_of,
    missing_capability,
    request_params,
)

log = logging.getLogger("mcpsync")


class CancelSignal(Protocol):
    """What a request's cancellation looks like to its Context: a `threading.Event`, or the
    transports' `Cancellable`."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


Notify = Callable[[str, dict[str, Any]], None]
"""Sends one request-scoped notification (`method`, `params`); a no-op once the request is answered."""
AskClient = Callable[[str, dict[str, Any]], "concurrent.futures.Future[dict[str, Any]]"]
"""Sends one server-to-client request tied to this request (handshake era); a future for the answer."""
AskKeyed = Callable[[str, dict[str, Any]], "concurrent.futures.Future[dict[str, Any]]"]
"""Puts one question (its key, its `inputRequests` entry) where a 2026-07-28 client will read it (a
task's `inputRequests`); a future for the answer."""


class AskCancelled(McpsyncError):
    """The client's answer will not come: the request was cancelled, or its connection or session
    ended, while the question waited. A tool that does not catch it returns an error result (the
    request is usually over anyway); nothing is logged as a crash."""


class AskTimeout(AskCancelled, TimeoutError):
    """The client did not answer within the question's timeout (`ask_timeout`, or `timeout=`);
    the question was withdrawn (`notifications/cancelled`)."""


class ClientRefused(McpError):
    """The client answered a question with an error (its code, message and data). A tool that
    does not catch it returns an error result naming the question, rather than passing the
    client's code off as its own answer to the call."""

    def __init__(self, method: str, error: McpError) -> None:
        super().__init__(error.code, error.message, error.data)
        self.method = method


class TaskStarted:
    """What `Context.run_task` returns when it started a task: the function returns it, and the
    call is answered with the task's creation result (`result`), not a result of its own."""

    __slots__ = ("result",)

    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result


class Context:
    """The request a function is serving: progress, logging and cancellation, in either era.

    Attributes:
        request_id: the JSON-RPC id of the request, with its JSON type.
        era: `Era.HANDSHAKE` or `Era.MODERN`.
        protocol_version: the negotiated (handshake) or requested (2026-07-28) version, if known.
        client_info: what the client said about itself, if anything.
        client_capabilities: the capabilities the client declared for this request or connection.
        principal: who made the request (subject, client id, scopes, claims), on an HTTP endpoint
            protected by `Auth`; None on stdio and on an open endpoint.
    """

    def __init__(
        self,
        *,
        request_id: Any,
        era: Era,
        protocol_version: str | None,
        client_info: dict[str, Any] | None,
        client_capabilities: dict[str, Any],
        progress_token: Any,
        notify: Notify,
        cancel_event: CancelSignal,
        wants_log: Callable[[str], bool],
        on_cancel: Callable[[Callable[[], None]], None] | None = None,
        ask_client: AskClient | None = None,
        answers: Mapping[str, Any] | None = None,
        state: Any = None,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
        seal: Callable[[dict[str, Any], Any], str] | None = None,
        principal: Principal | None = None,
        release_stream: Callable[[], bool] | None = None,
        ask_keyed: AskKeyed | None = None,
        start_task: Callable[[Callable[[Context], Any]], TaskStarted | None] | None = None,
    ) -> None:
        self.request_id = request_id
        self.principal = principal
        self.era = era
        self.protocol_version = protocol_version
        self.client_info = client_info
        self.client_capabilities = client_capabilities
        self._progress_token = progress_token
        self._notify = notify
        self._cancel_event = cancel_event
        self._wants_log = wants_log
        self._on_cancel = on_cancel
        self._release_stream = release_stream
        self._last_progress: float | None = None
        self._progress_lock = threading.Lock()
        self._ask_client = ask_client
        self._ask_keyed = ask_keyed
        self._start_task = start_task
        self._answers: dict[str, Any] = dict(answers or {})
        self._ask_timeout = ask_timeout
        self._seal = seal
        self._keys: KeyAssigner | None = None  # made at the first question: most requests ask none
        self.used_answers: dict[str, Any] = {}
        """The answers this run of the function took, by key (2026-07-28: sealed into the next state)."""
        self._unanswered: list[Question] = []
        self.state = state
        """What the function's last `InputRequired(state=...)` carried into this retry, else None."""

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request (or the server is shutting down)."""
        return self._cancel_event.is_set()

    @property
    def wants_progress(self) -> bool:
        """True when the client asked for progress (so reporting it is worth the work)."""
        return self._progress_token is not None

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run `callback` (on another thread) as soon as the request is cancelled; at once if it
        already is. For work that cannot poll `cancelled`, such as a call to another server."""
        if self._on_cancel is not None:
            self._on_cancel(callback)
        elif self.cancelled:
            callback()

    def close_stream(self) -> bool:
        """Close this request's event stream now and go on working (SEP-1699 polling): the client
        reconnects with the stream's last event id and is sent the rest, the answer included, so
        a long tool does not hold a connection (or a proxy's timeout) for its whole run.

        Only a handshake-era request of an HTTP session streams resumably: elsewhere (stdio,
        2026-07-28, a client that went away) this does nothing and returns False. A client that
        does not come back within the server's grace (30 s) cancels the request, as a lost
        stream does."""
        return self._release_stream() if self._release_stream is not None else False

    def run_task(self, fn: Callable[[Context], Any]) -> Any:
        """Run `fn(ctx)` as a task the client polls, and return what answers the call with the
        task's id; `fn` gets the task's own `Context` (its questions, cancellation and progress
        are the task's). For a tool that decides at run time that its work is long (after asking
        a question first, say). A client that cannot take a task (2026-07-28 without the tasks
        extension, 2025-11-25 without `params.task`) gets `fn(ctx)` run here and now instead."""
        started = self._start_task(fn) if self._start_task is not None else None
        return started if started is not None else fn(self)

    def wait_cancelled(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, waking early on cancellation; returns `cancelled`.

        Use this instead of `time.sleep` in a tool that waits, so a cancel ends the wait at once.
        """
        return self._cancel_event.wait(timeout)

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress. Sent only if the client asked (a `progressToken`); values must increase,
        and a value that does not is dropped rather than sent out of order."""
        if self._progress_token is None:
            return
        with self._progress_lock:
            if self._last_progress is not None and progress <= self._last_progress:
                log.debug("dropping non-increasing progress %r after %r", progress, self._last_progress)
                return
            self._last_progress = progress
            params: dict[str, Any] = {"progressToken": self._progress_token, "progress": progress}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            self._notify("notifications/progress", params)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a `notifications/message` to the client, if it asked for this level."""
        if level not in LOG_LEVEL_RANK:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVEL_RANK)}")
        if not self._wants_log(level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._notify("notifications/message", params)

    def debug(self, data: Any) -> None:
        self.log("debug", data)

    def info(self, data: Any) -> None:
        self.log("info", data)

    def warning(self, data: Any) -> None:
        self.log("warning", data)

    def error(self, data: Any) -> None:
        self.log("error", data)

    # -- asking the client -----------------------------------------------------------------------
    def elicit(self, message: str, schema: dict[str, Any] | None = None, *, key: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Ask the user to fill in a form (`schema`: a flat JSON Schema object); returns the
        client's `ElicitResult`: `{"action": "accept" | "decline" | "cancel", "content": {...}}`."""
        result: dict[str, Any] = self.ask(Question.elicitation(message, schema, key=key), timeout=timeout)[0]
        return result

    def elicit_url(
        self, message: str, url: str, *, key: str | None = None, timeout: float | None = None, elicitation_id: str | None = None
    ) -> dict[str, Any]:
        """Send the user to `url` (the client must declare URL-mode elicitation); returns the
        `ElicitResult` (`{"action": "accept"}` once the user went there). `elicitation_id` names
        it in the handshake era (a fresh id if None), for `elicitation_complete`."""
        question = Question.elicitation_url(message, url, key=key, elicitation_id=elicitation_id)
        result: dict[str, Any] = self.ask(question, timeout=timeout)[0]
        return result

    def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client that the flow a URL-mode elicitation sent the user to is done
        (`notifications/elicitation/complete`, MCP 2025-11-25), so it can move on (close the
        page, retry what waited for it). The 2026-07-28 era has no such notification (the retry
        carries what the flow gave): nothing is sent there."""
        if self.era is Era.HANDSHAKE:
            self._notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})

    def sample(
        self, messages: Any, *, max_tokens: int, key: str | None = None, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Ask the client's model; `messages` is a str (one user message) or a list of messages.
        `options`: system_prompt, temperature, stop_sequences, model_preferences,
        include_context, metadata, and tools and tool_choice (`Question.sampling`). Returns the
        `CreateMessageResult` (role, content, model, ...); with tools, its content may be a list
        holding `tool_use` blocks."""
        result: dict[str, Any] = self.ask(Question.sampling(messages, max_tokens=max_tokens, key=key, **options), timeout=timeout)[0]
        return result

    def roots(self, *, key: str | None = None, timeout: float | None = None) -> list[dict[str, Any]]:
        """The client's roots: `[{"uri": "file:///...", "name": ...}, ...]`."""
        roots: list[dict[str, Any]] = self.ask(Question.roots(key=key), timeout=timeout)[0]
        return roots

    def ask(self, *questions: Question, timeout: float | None = None) -> list[Any]:
        """Ask several questions at once; their answers, in order (`elicit`, `sample` and `roots`
        ask one).

        Handshake era: each is a request to the client, sent together; this waits for all of them
        (up to `timeout`, default 300 s) and ends early if the request is cancelled. 2026-07-28:
        the answers come with the client's retry; until they have, this does not return (the
        request answers `input_required` with every question asked so far, and the function runs
        again on the retry, from the start). Either way, a question the client did not declare
        the capability for raises -32021 `McpError` naming it."""
        keyed = [self.keyed(question) for question in questions]
        missing = [question for question in keyed if question.key not in self._answers]
        if len({question.key for question in keyed}) < len(keyed):
            raise ValueError("two questions asked together have the same key")
        for question in missing:
            refusal = missing_capability(question, self.client_capabilities, self.protocol_version)
            if refusal is not None:
                raise refusal
        if missing and self.era is Era.MODERN and self._ask_keyed is None:
            for question in keyed:  # the given answers travel on in the sealed state
                if question.key in self._answers:
                    checked_answer(question, self._answers[question.key])
                    self.used_answers[question.key] = self._answers[question.key]
            self._unanswered.extend(missing)
            raise NeedAnswers(self._unanswered)
        if missing:
            self._answers.update(self._ask_now(missing, timeout))
        answers = []
        for question in keyed:
            answer = self._answers[key_of(question)]
            answers.append(checked_answer(question, answer))
            self.used_answers[key_of(question)] = answer
        return answers

    def input_required(self, *questions: Question, state: Any = None) -> dict[str, Any]:
        """2026-07-28: the `input_required` result asking `questions` (keyed, capabilities
        checked), its `requestState` sealed with the answers taken so far and `state`. For code
        that answers a request itself, such as a gateway relaying an upstream's question; a
        function simply asks, or returns `InputRequired`."""
        if self._seal is None:
            raise McpsyncError("only a 2026-07-28 tools/call, prompts/get or resources/read can answer input_required")
        keyed = [self.keyed(question) for question in questions]
        for question in keyed:
            refusal = missing_capability(question, self.client_capabilities, self.protocol_version)
            if refusal is not None:
                raise refusal
        result: dict[str, Any] = {"resultType": "input_required"}
        if keyed:
            result["inputRequests"] = {question.key: input_request(question) for question in keyed}
        result["requestState"] = self._seal(self.used_answers, state)
        return result

    def answer_for(self, key: str) -> Any:
        """The client's answer under `key` (this round's or a sealed earlier one), or None."""
        return self._answers.get(key)

    def keyed(self, question: Question) -> Question:
        """The question with its key (the next in asking order when it has none)."""
        if self._keys is None:
            self._keys = KeyAssigner()
        return self._keys.key_for(question)

    def next_round(self, state: Any) -> None:
        """Before the function runs again in the same request (an `InputRequired` it returned on a
        handshake-era connection): keys count from the start, the answers so far stay."""
        self._keys = None
        self._unanswered = []
        self.used_answers = {}
        self.state = state

    def _send_question(self, question: Question) -> concurrent.futures.Future[dict[str, Any]]:
        if self._ask_keyed is not None:  # a 2026-07-28 task: into its inputRequests, under the key
            return self._ask_keyed(key_of(question), input_request(question))
        assert self._ask_client is not None
        return self._ask_client(question.method, request_params(question))

    def _ask_now(self, questions: list[Question], timeout: float | None) -> dict[str, Any]:
        """Handshake era: the requests go out together; wait for every answer or give up."""
        if self._ask_client is None and self._ask_keyed is None:
            raise McpsyncError("this transport cannot send requests to the client")
        futures: list[concurrent.futures.Future[dict[str, Any]]] = []

        def cancel_all() -> None:  # a no-op for the answered ones; the rest are forgotten and cancelled
            for future in futures:
                future.cancel()

        try:
            for question in questions:
                futures.append(self._send_question(question))
        except BaseException:
            cancel_all()
            raise
        self.on_cancel(cancel_all)
        limit = self._ask_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        answers: dict[str, Any] = {}
        try:
            for question, future in zip(questions, futures, strict=True):
                try:
                    answers[key_of(question)] = future.result(max(0.0, deadline - time.monotonic()))
                except concurrent.futures.TimeoutError:
                    raise AskTimeout(f"the client did not answer {question.method} within {limit:g} s") from None
                except concurrent.futures.CancelledError:
                    raise AskCancelled(f"the request was cancelled while waiting for {question.method}") from None
                except McpError as exc:
                    raise ClientRefused(question.method, exc) from None
                except McpsyncError as exc:  # the transport gave up: the request, connection or session ended
                    raise AskCancelled(str(exc)) from None
        finally:
            cancel_all()
        return answers
