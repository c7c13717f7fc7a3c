"""Tests for mcpsync.engine.interceptors: hooks around every execution and around tool calls.

`before_execute` rejects (McpError) or answers in place of the method; `after_execute` always runs
and may replace the outcome; `around_tool_call` wraps the tool (arguments, result, rejection).
A plain exception from any hook is a bug: -32603 with a correlation id that is also logged.
Also here: the engine's `tool_filter`, which hides a tool from listing and calling alike.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import pytest

from mcpsync.catalog.service import Service, Tool
from mcpsync.engine.interceptors import Call, Interceptor, ToolCall
from mcpsync.engine.outcome import Failure, Outcome, Success
from mcpsync.protocol.jsonrpc import ErrorCode, McpError
from mcpsync.protocol.versions import META_SERVER_INFO, Era
from tests.helpers import MODERN, SERVER_INFO, EngineHarness

pytestmark = pytest.mark.timeout(30)


def make_service(calls: list[dict[str, Any]] | None = None) -> Service:
    service = Service("hooks")
    record = calls if calls is not None else []

    @service.tool
    def add(a: int, b: int) -> int:
        record.append({"a": a, "b": b})
        return a + b

    @service.tool
    def secret() -> str:
        return "hidden"

    @service.tool
    def public() -> str:
        return "visible"

    return service


class Hooks(Interceptor):
    """An interceptor built from callables, recording what it saw."""

    def __init__(
        self,
        before: Callable[[Call], Any] | None = None,
        after: Callable[[Call, Outcome], Outcome] | None = None,
        around: Callable[[ToolCall, Any], dict[str, Any]] | None = None,
        log: list[str] | None = None,
        name: str = "hooks",
    ) -> None:
        self._before, self._after, self._around = before, after, around
        self.log = log if log is not None else []
        self.name = name
        self.seen_after: list[Outcome] = []
        self.seen_calls: list[Call] = []

    def before_execute(self, call: Call) -> dict[str, Any] | None:
        self.log.append(f"{self.name}.before")
        self.seen_calls.append(call)
        return self._before(call) if self._before else None

    def after_execute(self, call: Call, outcome: Outcome) -> Outcome:
        self.log.append(f"{self.name}.after")
        self.seen_after.append(outcome)
        return self._after(call, outcome) if self._after else outcome

    def around_tool_call(self, tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        self.log.append(f"{self.name}.around")
        if self._around:
            return self._around(tool_call, proceed)
        return proceed(tool_call)


def reject(call: Call) -> None:
    raise McpError(ErrorCode.INVALID_REQUEST, "rejected by policy", {"policy": "no"})


def harness(*interceptors: Interceptor, calls: list | None = None, **options: Any) -> EngineHarness:
    return EngineHarness([make_service(calls)], interceptors=interceptors, **options)


# -- before_execute ---------------------------------------------------------------------------------

@pytest.mark.parametrize("modern", [False, True])
def test_before_execute_can_reject_and_the_client_sees_its_error(modern: bool) -> None:
    calls: list = []
    h = harness(Hooks(before=reject), calls=calls)
    outcome = h.call_tool("add", {"a": 1, "b": 2}, modern=modern)
    error = h.fails(outcome, ErrorCode.INVALID_REQUEST)
    assert error.message == "rejected by policy"
    assert error.data == {"policy": "no"}
    assert calls == [], "the tool did not run"
    assert h.session.era is None, "a rejected request claims no era"


def test_before_execute_can_answer_in_place_of_the_method() -> None:
    h = harness(Hooks(before=lambda call: {"tools": []} if call.method == "tools/list" else None))
    assert h.ok(h.request("tools/list")) == {"tools": []}
    assert len(h.ok(h.request("prompts/list"))["prompts"]) == 0  # other methods run as usual
    assert h.ok(h.call_tool("add", {"a": 1, "b": 1}))["structuredContent"] == {"result": 2}


def test_a_replacement_result_is_dressed_for_the_modern_era() -> None:
    h = harness(Hooks(before=lambda call: {"tools": []}))
    outcome = h.modern("tools/list", commit=False)
    assert isinstance(outcome, Success)
    assert outcome.claims is Era.MODERN
    result = outcome.result
    assert result["tools"] == []
    assert result["resultType"] == "complete"
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


def test_a_replacement_result_is_not_dressed_in_the_handshake_era() -> None:
    h = harness(Hooks(before=lambda call: {"tools": []}))
    assert h.ok(h.request("tools/list")) == {"tools": []}


def test_a_replacement_result_reused_across_eras_is_not_polluted() -> None:
    cached = {"tools": []}
    modern = harness(Hooks(before=lambda call: cached))
    modern.ok(modern.modern("tools/list"))
    handshake = harness(Hooks(before=lambda call: cached))
    assert handshake.ok(handshake.request("tools/list")) == {"tools": []}
    assert cached == {"tools": []}


def test_before_execute_sees_the_classified_call() -> None:
    hooks = Hooks()
    h = harness(hooks)
    h.ok(h.initialize("2025-06-18"))
    h.ok(h.request("tools/list"))
    first, second = hooks.seen_calls
    assert (first.method, first.era, first.envelope) == ("initialize", Era.HANDSHAKE, None)
    assert (second.method, second.era, second.protocol_version) == ("tools/list", Era.HANDSHAKE, "2025-06-18")

    hooks = Hooks()
    h = harness(hooks)
    h.ok(h.modern("tools/list", id="m1"))
    [call] = hooks.seen_calls
    assert call.era is Era.MODERN
    assert call.envelope is not None and call.envelope.protocol_version == MODERN
    assert call.protocol_version == MODERN
    assert call.request.id == "m1"
    assert call.session is h.session


def test_the_first_replacing_interceptor_wins_and_later_before_hooks_are_skipped() -> None:
    log: list[str] = []
    h = harness(
        Hooks(log=log, name="one"),
        Hooks(before=lambda call: {"tools": [{"name": "from-two"}]}, log=log, name="two"),
        Hooks(before=lambda call: {"tools": [{"name": "from-three"}]}, log=log, name="three"),
    )
    assert h.ok(h.request("tools/list"))["tools"] == [{"name": "from-two"}]
    assert log == ["one.before", "two.before", "one.after", "two.after", "three.after"]


def test_a_rejected_initialize_can_be_retried() -> None:
    attempts = []

    def first_fails(call: Call) -> None:
        if call.method == "initialize" and not attempts:
            attempts.append(call)
            raise McpError(ErrorCode.INVALID_REQUEST, "not yet")

    h = harness(Hooks(before=first_fails))
    h.fails(h.initialize(), ErrorCode.INVALID_REQUEST)
    assert h.session.era is None
    h.ok(h.initialize())
    assert h.session.era is Era.HANDSHAKE


# -- after_execute ---------------------------------------------------------------------------------------

def test_after_execute_sees_every_outcome() -> None:
    hooks = Hooks()
    h = harness(hooks)
    h.ok(h.request("tools/list"))
    h.fails(h.call_tool("nope"), ErrorCode.INVALID_PARAMS)
    h.ok(h.call_tool("add", {"a": 1, "b": 2}))
    kinds = [type(outcome).__name__ for outcome in hooks.seen_after]
    assert kinds == ["Success", "Failure", "Success"]
    assert hooks.seen_after[1].error.code == ErrorCode.INVALID_PARAMS


def test_after_execute_runs_even_after_a_rejection() -> None:
    watcher = Hooks()
    h = harness(Hooks(before=reject), watcher)
    h.fails(h.request("tools/list"), ErrorCode.INVALID_REQUEST)
    [outcome] = watcher.seen_after
    assert isinstance(outcome, Failure) and outcome.error.message == "rejected by policy"


def test_after_execute_runs_after_a_second_initialize() -> None:
    watcher = Hooks()
    h = harness(watcher)
    h.ok(h.initialize())
    h.fails(h.initialize(), ErrorCode.INVALID_REQUEST)
    assert isinstance(watcher.seen_after[-1], Failure)


def test_after_execute_sees_a_replacement_undressed_and_the_client_gets_it_dressed() -> None:
    watcher = Hooks()
    h = harness(Hooks(before=lambda call: {"tools": []}), watcher)
    final = h.ok(h.modern("tools/list"))
    [outcome] = watcher.seen_after
    assert isinstance(outcome, Success) and outcome.result == {"tools": []}  # era-agnostic for the hooks
    assert final["resultType"] == "complete" and final["tools"] == []


def test_after_execute_can_replace_a_success_with_a_failure() -> None:
    h = harness(Hooks(after=lambda call, outcome: Failure(McpError(ErrorCode.INVALID_REQUEST, "vetoed"))))
    assert h.fails(h.request("tools/list"), ErrorCode.INVALID_REQUEST).message == "vetoed"


def test_after_execute_can_replace_a_failure_with_a_success() -> None:
    h = harness(Hooks(after=lambda call, outcome: Success({"tools": []}) if isinstance(outcome, Failure) else outcome))
    assert h.ok(h.call_tool("nope")) == {"tools": []}


def test_after_execute_hooks_chain_in_order() -> None:
    h = harness(
        Hooks(after=lambda call, outcome: Success({"n": 1})),
        Hooks(after=lambda call, outcome: Success({"n": outcome.result["n"] * 10})),
    )
    assert h.ok(h.request("ping")) == {"n": 10}


def test_an_after_execute_replacement_is_dressed_for_the_modern_era() -> None:
    h = harness(Hooks(after=lambda call, outcome: Success({"tools": []})))
    outcome = h.modern("tools/list", commit=False)
    result = h.ok(outcome)
    assert result["resultType"] == "complete"
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")
    assert outcome.claims is Era.MODERN


def test_a_vetoed_modern_success_claims_no_era() -> None:
    h = harness(Hooks(after=lambda call, outcome: Failure(McpError(ErrorCode.INVALID_REQUEST, "vetoed"))))
    h.fails(h.modern("tools/list"), ErrorCode.INVALID_REQUEST)
    assert h.session.era is None


def test_a_vetoed_initialize_claims_no_era_and_can_be_retried() -> None:
    vetoes = [True]

    def veto_once(call: Call, outcome: Outcome) -> Outcome:
        if call.method == "initialize" and vetoes:
            vetoes.pop()
            return Failure(McpError(ErrorCode.INVALID_REQUEST, "vetoed"))
        return outcome

    h = harness(Hooks(after=veto_once))
    h.fails(h.initialize(), ErrorCode.INVALID_REQUEST)
    assert h.session.era is None
    h.ok(h.initialize())
    assert h.session.era is Era.HANDSHAKE


# -- around_tool_call ---------------------------------------------------------------------------------------

def test_around_tool_call_sees_the_tool_and_its_context() -> None:
    seen: list[ToolCall] = []

    def spy(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        seen.append(tool_call)
        return proceed(tool_call)

    h = harness(Hooks(around=spy))
    h.ok(h.call_tool("add", {"a": 1, "b": 2}, id="call-1"))
    [tool_call] = seen
    assert tool_call.name == "add"
    assert tool_call.arguments == {"a": 1, "b": 2}
    assert tool_call.context.request_id == "call-1"
    assert tool_call.call.method == "tools/call"


def test_around_tool_call_runs_only_for_tools_call() -> None:
    log: list[str] = []
    h = harness(Hooks(log=log))
    h.ok(h.request("tools/list"))
    assert "hooks.around" not in log


def test_around_tool_call_can_change_the_arguments() -> None:
    calls: list = []

    def double(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        tool_call.arguments = {name: value * 2 for name, value in tool_call.arguments.items()}
        return proceed(tool_call)

    h = harness(Hooks(around=double), calls=calls)
    assert h.ok(h.call_tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 6}
    assert calls == [{"a": 2, "b": 4}]


def test_changed_arguments_are_validated_again() -> None:
    calls: list = []

    def corrupt(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        tool_call.arguments = {"a": "one", "b": 2}
        return proceed(tool_call)

    h = harness(Hooks(around=corrupt), calls=calls)
    result = h.ok(h.call_tool("add", {"a": 1, "b": 2}))
    assert result == {"content": [{"type": "text", "text": "Invalid arguments for tool 'add' at 'a': 'one' is not of type 'integer'"}], "isError": True}
    assert calls == []


def test_arguments_supplied_by_an_interceptor_when_the_client_sent_none_are_validated() -> None:
    def supply(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        tool_call.arguments = {"a": 20, "b": 22}
        return proceed(tool_call)

    h = harness(Hooks(around=supply))
    assert h.ok(h.call_tool("add", {"a": 0, "b": 0}))["structuredContent"] == {"result": 42}


def test_arguments_changed_in_place_are_validated_again() -> None:
    calls: list = []

    def corrupt_in_place(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        tool_call.arguments["a"] = "one"
        return proceed(tool_call)

    h = harness(Hooks(around=corrupt_in_place), calls=calls)
    assert h.ok(h.call_tool("add", {"a": 1, "b": 2}))["isError"] is True
    assert calls == []


def test_an_interceptor_sees_the_error_result_of_arguments_it_broke() -> None:
    seen: list = []

    def corrupt_and_watch(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        tool_call.arguments = {"a": 1}
        seen.append(proceed(tool_call))
        return seen[-1]

    h = harness(Hooks(around=corrupt_and_watch))
    assert h.ok(h.call_tool("add", {"a": 1, "b": 2})) == seen[0]
    assert seen[0]["isError"] is True and "'b' is a required property" in seen[0]["content"][0]["text"]


def test_around_tool_call_can_replace_the_result_without_running_the_tool() -> None:
    calls: list = []
    h = harness(Hooks(around=lambda tool_call, proceed: {"content": [{"type": "text", "text": "cached"}], "isError": False}), calls=calls)
    assert h.ok(h.call_tool("add", {"a": 1, "b": 2})) == {"content": [{"type": "text", "text": "cached"}], "isError": False}
    assert calls == []


def test_around_tool_call_can_change_the_tools_result() -> None:
    def redact(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        result = proceed(tool_call)
        result["content"] = [{"type": "text", "text": "[redacted]"}]
        return result

    h = harness(Hooks(around=redact))
    result = h.ok(h.call_tool("add", {"a": 1, "b": 2}))
    assert result["content"] == [{"type": "text", "text": "[redacted]"}]


def test_a_replaced_tool_result_is_dressed_for_the_modern_era() -> None:
    h = harness(Hooks(around=lambda tool_call, proceed: {"content": [], "isError": False}))
    result = h.ok(h.call_tool("add", {"a": 1, "b": 2}, modern=True))
    assert result["resultType"] == "complete"
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO


def test_around_tool_call_can_reject_with_an_mcp_error() -> None:
    calls: list = []

    def deny(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
        raise McpError(ErrorCode.INVALID_PARAMS, "tool denied", {"tool": tool_call.name})

    h = harness(Hooks(around=deny), calls=calls)
    error = h.fails(h.call_tool("add", {"a": 1, "b": 2}), ErrorCode.INVALID_PARAMS)
    assert (error.message, error.data) == ("tool denied", {"tool": "add"})
    assert calls == []


def test_around_tool_call_nests_with_the_first_interceptor_outermost() -> None:
    log: list[str] = []

    def wrap(name: str) -> Callable[[ToolCall, Any], dict[str, Any]]:
        def around(tool_call: ToolCall, proceed: Any) -> dict[str, Any]:
            log.append(f"{name} in")
            result = proceed(tool_call)
            log.append(f"{name} out")
            return result

        return around

    h = harness(Hooks(around=wrap("outer")), Hooks(around=wrap("inner")))
    h.ok(h.call_tool("add", {"a": 1, "b": 2}))
    assert log == ["outer in", "inner in", "inner out", "outer out"]


def test_structured_content_from_an_interceptor_is_still_gated_by_version() -> None:
    h = harness(Hooks(around=lambda tool_call, proceed: {"content": [], "isError": False, "structuredContent": {"x": 1}}))
    h.ok(h.initialize("2025-03-26"))
    assert "structuredContent" not in h.ok(h.call_tool("add", {"a": 1, "b": 2}))


# -- a hook that raises a plain exception is a bug: -32603 with a correlation id -----------------------------

def _boom(*args: Any) -> Any:
    raise RuntimeError("interceptor bug")


@pytest.mark.parametrize("where", ["before", "after", "around"])
@pytest.mark.parametrize("modern", [False, True])
def test_an_interceptor_that_raises_is_an_internal_error_with_a_correlation_id(where: str, modern: bool, caplog: pytest.LogCaptureFixture) -> None:
    h = harness(Hooks(**{where: _boom}))
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        outcome = h.call_tool("add", {"a": 1, "b": 2}, modern=modern)
    error = h.fails(outcome, ErrorCode.INTERNAL_ERROR)
    assert "interceptor bug" not in error.message, "no exception text leaks to the client"
    correlation = error.data["correlationId"]
    assert isinstance(correlation, str) and correlation
    assert any(correlation in record.getMessage() and record.exc_info for record in caplog.records), "the log names the same id"
    assert h.session.era is None


def test_correlation_ids_differ_per_failure() -> None:
    h = harness(Hooks(before=_boom))
    first = h.fails(h.request("tools/list"), ErrorCode.INTERNAL_ERROR).data["correlationId"]
    second = h.fails(h.request("tools/list"), ErrorCode.INTERNAL_ERROR).data["correlationId"]
    assert first != second


def test_after_execute_still_runs_after_a_hook_bug() -> None:
    watcher = Hooks()
    h = harness(Hooks(before=_boom), watcher)
    h.fails(h.request("tools/list"), ErrorCode.INTERNAL_ERROR)
    [outcome] = watcher.seen_after
    assert isinstance(outcome, Failure) and outcome.error.code == ErrorCode.INTERNAL_ERROR


def test_the_default_interceptor_changes_nothing() -> None:
    plain = EngineHarness([make_service()])
    hooked = harness(Interceptor())
    for h in (plain, hooked):
        h.ok(h.initialize())
    assert hooked.ok(hooked.call_tool("add", {"a": 1, "b": 2})) == plain.ok(plain.call_tool("add", {"a": 1, "b": 2}))
    assert hooked.ok(hooked.request("tools/list")) == plain.ok(plain.request("tools/list"))


# -- tool_filter ------------------------------------------------------------------------------------------------

def hide_secret(tool: Tool) -> bool:
    return tool.name != "secret"


@pytest.mark.parametrize("modern", [False, True])
def test_tool_filter_hides_a_tool_from_tools_list(modern: bool) -> None:
    h = harness(tool_filter=hide_secret)
    names = [tool["name"] for tool in h.list_all("tools/list", "tools", modern=modern)]
    assert names == ["add", "public"]


@pytest.mark.parametrize("modern", [False, True])
def test_tool_filter_hides_a_tool_from_tools_call(modern: bool) -> None:
    h = harness(tool_filter=hide_secret)
    error = h.fails(h.call_tool("secret", {}, modern=modern), ErrorCode.INVALID_PARAMS)
    assert "secret" in error.message
    assert h.ok(h.call_tool("public", {}, modern=modern))["content"] == [{"type": "text", "text": "visible"}]


def test_a_filtered_tool_looks_exactly_like_an_unknown_one() -> None:
    h = harness(tool_filter=hide_secret)
    hidden = h.fails(h.call_tool("secret", {}), ErrorCode.INVALID_PARAMS)
    unknown = h.fails(h.call_tool("never_existed", {}), ErrorCode.INVALID_PARAMS)
    assert hidden.message.replace("secret", "X") == unknown.message.replace("never_existed", "X")


def test_pagination_counts_only_visible_tools() -> None:
    h = harness(tool_filter=hide_secret, page_size=2)
    first = h.ok(h.request("tools/list"))
    assert [tool["name"] for tool in first["tools"]] == ["add", "public"]
    assert "nextCursor" not in first


def test_tool_filter_is_asked_at_call_time() -> None:
    allowed = {"secret"}
    h = harness(tool_filter=lambda tool: tool.name in allowed)
    h.ok(h.call_tool("secret", {}))
    allowed.clear()
    h.fails(h.call_tool("secret", {}), ErrorCode.INVALID_PARAMS)
