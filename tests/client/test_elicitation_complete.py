"""URL-mode elicitation's completion (MCP 2025-11-25): a tool names its elicitation, sends the user to
a URL, and once the flow there is done tells the client (`notifications/elicitation/complete`),
which hears it before the call's answer; in 2026-07-28, which has no such notification nor ids,
nothing is sent and the question carries no id."""

from __future__ import annotations

from typing import Any

import pytest

import mcpsync
from mcpsync import Context, Server, Service

pytestmark = pytest.mark.timeout(60)


def _server(done: list[str]) -> Server:
    service = Service("payments")

    @service.tool
    def pay(ctx: Context) -> str:
        answer = ctx.elicit_url("Pay on the bank's page", "https://bank.example/pay/42", elicitation_id="pay-42")
        done.append("paid")  # the out-of-band flow finished (a webhook, in a real server)
        ctx.elicitation_complete("pay-42")
        return str(answer["action"])

    return Server("payments", services=[service])


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_the_client_hears_the_flow_is_done_before_the_answer_in_the_handshake_era_only(mode: str) -> None:
    heard: list[Any] = []
    asked: list[dict[str, Any]] = []

    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept"}

    with mcpsync.connect(_server([]), mode=mode, elicitation=elicitation, elicitation_modes=("form", "url"),
                         on_elicitation_complete=lambda elicitation_id: heard.append(elicitation_id)) as session:
        result = session.call_tool("pay")
        heard.append("answered")
    assert result["content"][0]["text"] == "accept"
    [params] = asked
    assert (params["mode"], params["url"]) == ("url", "https://bank.example/pay/42")
    if mode == "legacy":
        assert params["elicitationId"] == "pay-42" and heard == ["pay-42", "answered"]
    else:
        assert "elicitationId" not in params and heard == ["answered"]
