"""Sampling with tools between mcpsync's server and client, both eras, over a pipe: the client
declares `sampling.tools` only when asked to (`sampling_tools=True`), and a server's question that
offers tools to a client that did not declare it is refused (-32021, naming "sampling with tools")
before anything is sent; a `tool_choice` that is none of the three is the tool's own error."""

from __future__ import annotations

from typing import Any

import pytest

import mcpsync
from mcpsync import Context, McpError, Server, Service, Tool

pytestmark = pytest.mark.timeout(60)


def _server() -> Server:
    service = Service("sampler")

    def lookup(city: str) -> str:
        return f"sunny in {city}"

    @service.tool
    def plan(ctx: Context, choice: str = "required") -> str:
        answer = ctx.sample("Weather?", max_tokens=50, tools=[Tool(lookup), {"name": "raw", "inputSchema": {"type": "object"}}], tool_choice=choice)
        blocks = answer["content"] if isinstance(answer["content"], list) else [answer["content"]]
        return ",".join(block["type"] for block in blocks)

    return Server("sampler", services=[service])


def _model(asked: list[dict[str, Any]]) -> Any:
    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        use = {"type": "tool_use", "id": "u1", "name": "lookup", "input": {"city": "Porto"}}
        return {"role": "assistant", "content": [use, {"type": "text", "text": "checking"}], "model": "m", "stopReason": "toolUse"}

    return answer


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_a_client_that_declares_sampling_tools_gets_the_tools_and_answers_with_tool_use(mode: str) -> None:
    asked: list[dict[str, Any]] = []
    with mcpsync.connect(_server(), mode=mode, sampling=_model(asked), sampling_tools=True) as session:
        assert session.capabilities["sampling"] == {"tools": {}}
        result = session.call_tool("plan")
    assert result["content"][0]["text"] == "tool_use,text"
    [params] = asked
    assert [tool["name"] for tool in params["tools"]] == ["lookup", "raw"] and params["toolChoice"] == {"mode": "required"}
    assert params["tools"][0]["inputSchema"]["required"] == ["city"]


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_tools_offered_to_a_client_that_did_not_declare_them_are_refused_before_it_is_asked(mode: str) -> None:
    asked: list[dict[str, Any]] = []
    with mcpsync.connect(_server(), mode=mode, sampling=_model(asked)) as session:
        assert session.capabilities["sampling"] == {}
        if mode == "legacy":  # the handshake era's way: the call's own error
            result = session.call_tool("plan")
            assert result["isError"] is True and "sampling with tools" in result["content"][0]["text"]
        else:  # 2026-07-28's: -32021, the capability missing
            with pytest.raises(McpError) as refused:
                session.call_tool("plan")
            assert refused.value.code == -32021 and "sampling with tools" in refused.value.message
    assert asked == []


def test_a_tool_choice_that_is_none_of_the_three_is_the_tools_error() -> None:
    with mcpsync.connect(_server(), sampling=_model([]), sampling_tools=True) as session:
        result = session.call_tool("plan", {"choice": "always"})
    assert result["isError"] is True
