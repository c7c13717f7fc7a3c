"""Tool arguments that fail the `inputSchema`, over real pipes: a tool execution error, not -32602.

The 2025-11-25 spec (tools.mdx, Error Handling; SEP-1303) counts input validation errors as tool
execution errors: the result has `isError: true` and a text the model can read and correct itself
by. JSON-RPC errors stay for requests that break `CallToolRequest` itself (no `name`, `arguments`
not an object) and for unknown tools. What a client must notice, in both eras, from `mcpsync serve`
and through a gateway in front of it (a 2026-07-28 and a handshake-era upstream):

- bad arguments are an `isError` result naming the field and the rule;
- the answer stays small however large the offending value (a 10 MB string) or however deep
  (1,000 levels of arrays): no echo of the value, no -32603 and no traceback;
- `name` missing, `arguments` not an object and an unknown tool are still -32602;
- and jsonschema, a large part of start-up, is not even imported until a call needs it.

Ordering comes from responses, never from sleeping; every wait is bounded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from wire import EraClient, GatewayClient, ServerProcess, has_traceback, legacy_init, serve_argv

pytestmark = pytest.mark.timeout(90)

ERAS = ["handshake", "modern"]
HUGE = 10_000_000
LEVELS = 1000
SMALL = 1000  # bytes: an answer about a bad argument fits in this, whatever the argument was
SLOW = 30.0  # seconds for the 10 MB request to be written, read and answered (and forwarded)
PLACEHOLDER = "@value@"


# -- servers, one per era (gateways: one per downstream era, each with both upstream eras) --------

class Endpoint:
    """One era's way to reach a demo `add` tool: a `ServerProcess`, the era's `params()` dressing,
    and the name the tool has there."""

    def __init__(self, proc: ServerProcess, client: EraClient | GatewayClient, add: str) -> None:
        self.proc = proc
        self.client = client
        self.add = add

    def call(self, params: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        return self.proc.request("tools/call", self.client.params(params), timeout=timeout)

    def call_raw(self, params: dict[str, Any], value_json: str, timeout: float = 10.0) -> dict[str, Any]:
        """A call whose `PLACEHOLDER` string is replaced by `value_json` verbatim (a value the
        encoder here would refuse to nest that deep)."""
        frame = self.proc.request_frame("tools/call", self.client.params(params))
        text = json.dumps(frame, separators=(",", ":")).replace(json.dumps(PLACEHOLDER), value_json)
        self.proc.send(text + "\n")
        return self.proc.response(frame["id"], timeout)


def gateway_config(directory: Path) -> Path:
    """Two upstream demo servers: one spoken to in 2026-07-28 (`new_`), one in the handshake era (`old_`)."""
    demo = json.dumps([sys.executable, "-m", "mcpsync", "serve"])
    config = directory / "gateway.toml"
    config.write_text(
        f'[upstreams.new]\ncommand = {demo}\nprefix = "new_"\n\n'
        f'[upstreams.old]\ncommand = {demo}\nmode = "legacy"\nprefix = "old_"\n'
    )
    return config


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str, str], tuple[ServerProcess, Any]]]:
    """`open(kind, era)`: the module's one `serve` or gateway process for that era, started and
    opened in that era on first use; every one is killed at the end."""
    running: dict[tuple[str, str], tuple[ServerProcess, Any]] = {}
    config = gateway_config(tmp_path_factory.mktemp("gateway"))

    def open_(kind: str, era: str) -> tuple[ServerProcess, Any]:
        if (kind, era) not in running or running[kind, era][0].proc.poll() is not None:
            argv = serve_argv() if kind == "serve" else serve_argv("--config", str(config))
            proc = ServerProcess(argv).__enter__()
            try:
                running[kind, era] = (proc, EraClient(proc, era) if kind == "serve" else GatewayClient(proc, era))
            except BaseException:
                proc.cleanup()
                raise
        return running[kind, era]

    yield open_
    for proc, _ in running.values():
        proc.cleanup()


ENDPOINTS = [("serve", era, "") for era in ERAS] + [("gateway", era, prefix) for era in ERAS for prefix in ("new_", "old_")]


@pytest.fixture(params=ENDPOINTS, ids=lambda p: f"{p[0]}-{p[1]}" + (f"-{p[2].rstrip('_')}-upstream" if p[2] else ""))
def endpoint(request: pytest.FixtureRequest, opened: Callable[[str, str], tuple[ServerProcess, Any]]) -> Endpoint:
    """`mcpsync serve` (the demo), or a gateway (`serve --config`) in front of a 2026-07-28 (`new_`)
    and a handshake-era (`old_`) demo upstream, spoken to in one era."""
    kind, era, prefix = request.param
    proc, client = opened(kind, era)
    return Endpoint(proc, client, prefix + "add")


def error_text(response: dict[str, Any]) -> str:
    """The one text block of an `isError` result (a response that is anything else fails)."""
    assert "result" in response, response
    result = response["result"]
    assert result["isError"] is True, result
    assert "structuredContent" not in result, result
    [block] = result["content"]
    assert block["type"] == "text", result
    return block["text"]


def assert_still_serving(endpoint: Endpoint) -> None:
    response = endpoint.call({"name": endpoint.add, "arguments": {"a": 2, "b": 40}})
    assert response["result"]["content"] == [{"type": "text", "text": "42"}], response
    assert not has_traceback(endpoint.proc.stderr_text()), endpoint.proc.stderr_tail()


# -- bad arguments: a result the model can read -----------------------------------------------------

@pytest.mark.parametrize("arguments, field, rule", [
    ({"a": "two", "b": 1}, "a", "'two' is not of type 'integer'"),
    ({"a": 1, "b": 2.5}, "b", "2.5 is not of type 'integer'"),
    ({"a": 1}, "b", "'b' is a required property"),
    ({"a": 1, "b": 2, "c": 3}, "c", "Additional properties are not allowed ('c' was unexpected)"),
], ids=["wrong-type", "float-for-int", "missing", "unexpected"])
def test_bad_arguments_are_an_error_result_naming_the_field_and_the_rule(
    endpoint: Endpoint, arguments: dict[str, Any], field: str, rule: str
) -> None:
    text = error_text(endpoint.call({"name": endpoint.add, "arguments": arguments}))
    assert text.startswith("Invalid arguments for tool 'add'"), text  # the upstream's own name for it
    assert f"'{field}'" in text and text.endswith(rule), text


def test_a_huge_wrongly_typed_string_is_answered_in_a_few_hundred_bytes(endpoint: Endpoint) -> None:
    response = endpoint.call({"name": endpoint.add, "arguments": {"a": "x" * HUGE, "b": 1}}, timeout=SLOW)
    assert len(json.dumps(response)) < SMALL, json.dumps(response)[:SMALL]
    text = error_text(response)
    assert f"at 'a': 'xxxxxxxxxx" in text and f"({HUGE} characters)" in text and "'type': 'integer'" in text, text
    assert_still_serving(endpoint)


def test_arguments_nested_a_thousand_deep_get_the_same_bounded_answer(endpoint: Endpoint) -> None:
    nested = "[" * LEVELS + "1" + "]" * LEVELS
    response = endpoint.call_raw({"name": endpoint.add, "arguments": {"a": PLACEHOLDER, "b": 1}}, nested)
    assert len(json.dumps(response)) < SMALL, json.dumps(response)[:SMALL]
    text = error_text(response)  # not -32603
    assert text.startswith("Invalid arguments for tool 'add' at 'a"), text
    assert_still_serving(endpoint)


# -- what stays a JSON-RPC error --------------------------------------------------------------------

@pytest.mark.parametrize("params, words", [
    ({"arguments": {"a": 1, "b": 2}}, "params.name must be a string"),
    ({"name": "add", "arguments": [1, 2]}, "params.arguments must be an object"),
    ({"name": "add", "arguments": "a=1&b=2"}, "params.arguments must be an object"),
    ({"name": "no_such_tool", "arguments": {}}, "Unknown tool: no_such_tool"),
], ids=["no-name", "arguments-array", "arguments-string", "unknown-tool"])
def test_a_broken_call_request_or_an_unknown_tool_is_still_invalid_params(endpoint: Endpoint, params: dict[str, Any], words: str) -> None:
    if params.get("name") == "add":
        params = {**params, "name": endpoint.add}
    response = endpoint.call(params)
    assert "error" in response, response
    assert response["error"]["code"] == -32602 and words in response["error"]["message"], response


# -- start-up: jsonschema waits for a call that needs it ------------------------------------------

def test_serve_does_not_import_jsonschema_until_a_call_needs_it() -> None:
    argv = [sys.executable, "-X", "importtime", *serve_argv()[1:]]  # importtime lines go to stderr
    with ServerProcess(argv) as proc:
        legacy_init(proc)
        assert "add" in [tool["name"] for tool in proc.result("tools/list")["tools"]]
        assert proc.result("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})["isError"] is False
        assert "| jsonschema" not in proc.stderr_text(), "initialize, tools/list and a valid call imported jsonschema"
        bad = proc.result("tools/call", {"name": "add", "arguments": {"a": "one", "b": 2}})
        assert bad["isError"] is True
        assert "| jsonschema" in proc.stderr_text(), "the bad call needed jsonschema's message, and imported it"
