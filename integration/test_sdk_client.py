"""mcpsync's embedded demo service, driven over stdio by the official MCP Python SDK client.

Each mode runs ``sdk_client_driver.py`` once (in the peers venv, as a separate process) against
``python -m mcpsync serve`` and the tests below check its summary:

* ``legacy``: ``Client(mode="legacy")``, the handshake era (``initialize``).
* ``modern``: ``Client(mode="auto")``, which probes ``server/discover`` and must adopt 2026-07-28.
* ``pinned``: ``Client(mode="2026-07-28")``, no probe: the first request is an enveloped ``tools/list``.

Beyond the demo script the driver also calls ``fail`` and ``countdown`` (with a progress callback) and,
in the 2026-07-28 modes, opens one ``subscriptions/listen``; those outcomes are recorded rather than
fatal, so each has its own test here.

The SDK validates every result against the negotiated version's schema, so a run that completes
already proves the client accepted the server's answers; these tests pin the content and the
era-specific fields (which the SDK tolerates in the wrong era, so only these checks catch them).

Set MCPSYNC_TEST_SERVER_CMD (a shell-quoted command) to aim the same tests at another server.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_client_driver.py")
SERVER_CMD = shlex.split(os.environ.get("MCPSYNC_TEST_SERVER_CMD", "")) or [sys.executable, "-m", "mcpsync", "serve"]
MODES = ["legacy", "modern", "pinned"]
MODERN_MODES = ["modern", "pinned"]
DRIVER_TIMEOUT = 60.0  # the driver bounds itself at 30 s (+15 s watchdog); this is the backstop

ENVELOPE_KEYS = {"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"}
DEMO_TOOLS = {"add", "echo", "word_stats", "countdown", "fail"}
CACHEABLE = ("toolsList", "promptsList", "resourcesList", "templatesList")


@pytest.fixture(scope="module")
def summary_for(peers_python: str, bounded: Any, repo_root: Path) -> Any:
    """mode -> the driver's summary. Each mode runs once per module, on first use; a failed run
    fails every test that needs it, each time with the driver's report."""
    runs: dict[str, Any] = {}

    def get(mode: str) -> dict[str, Any]:
        if mode not in runs:
            args = [peers_python, str(DRIVER), "--mode", mode, "--cwd", str(repo_root), "--", *SERVER_CMD]
            try:
                runs[mode] = bounded(args, timeout=DRIVER_TIMEOUT, cwd=repo_root)
            except pytest.fail.Exception as timed_out:  # remembered, so a hang costs one timeout, not one per test
                runs[mode] = timed_out
        result = runs[mode]
        if isinstance(result, BaseException):
            pytest.fail(str(result), pytrace=False)
        if result.returncode != 0:
            pytest.fail(
                f"official SDK client ({mode} mode) failed against {SERVER_CMD}, exit status {result.returncode}:\n"
                f"{result.stderr[-12000:]}",
                pytrace=False,
            )
        return json.loads(result.stdout)

    return get


@pytest.fixture(params=MODES)
def summary(request: pytest.FixtureRequest, summary_for: Any) -> dict[str, Any]:
    return summary_for(request.param)


@pytest.fixture(params=MODERN_MODES)
def modern_summary(request: pytest.FixtureRequest, summary_for: Any) -> dict[str, Any]:
    return summary_for(request.param)


@pytest.fixture
def legacy_summary(summary_for: Any) -> dict[str, Any]:
    return summary_for("legacy")


@pytest.fixture
def probe_summary(summary_for: Any) -> dict[str, Any]:
    return summary_for("modern")


def texts(content: list[dict[str, Any]]) -> list[str]:
    return [block["text"] for block in content if block.get("type") == "text"]


# --- what every mode must see -------------------------------------------------------------------


def test_tool_list_has_the_demo_tools(summary: dict[str, Any]) -> None:
    assert DEMO_TOOLS <= set(summary["tools"]), summary["tools"]


def test_add_returns_text_and_structured_content(summary: dict[str, Any]) -> None:
    result = summary["calls"]["add"]
    assert texts(result["content"]) == ["5"]
    assert result["structuredContent"] == {"result": 5}
    assert not result.get("isError", False)


def test_echo_returns_the_text(summary: dict[str, Any]) -> None:
    result = summary["calls"]["echo"]
    assert texts(result["content"]) == ["hi"]
    assert not result.get("isError", False)


def test_review_code_prompt_is_a_user_message_with_the_code(summary: dict[str, Any]) -> None:
    assert "review_code" in summary["prompts"]
    messages = summary["prompt"]["messages"]
    user_texts = [m["content"].get("text", "") for m in messages if m["role"] == "user"]
    assert any("print(1)" in text for text in user_texts), messages


def test_readme_is_markdown_text(summary: dict[str, Any]) -> None:
    assert "demo://readme" in summary["resources"]
    (contents,) = summary["reads"]["readme"]["contents"]
    assert contents["uri"] == "demo://readme"
    assert contents["mimeType"] == "text/markdown"
    assert isinstance(contents.get("text"), str) and contents["text"].strip()


def test_templated_greeting_names_ada(summary: dict[str, Any]) -> None:
    (contents,) = summary["reads"]["greeting"]["contents"]
    assert contents["uri"] == "demo://greeting/Ada"
    assert "Ada" in contents["text"]


def test_fail_reports_a_tool_error_in_the_result(summary: dict[str, Any]) -> None:
    result = summary["extras"]["fail"]
    assert "error" not in result, f"tools/call fail raised instead of returning isError: {result.get('error')}"
    assert result["isError"] is True
    assert any(text.strip() for text in texts(result["content"]))


def test_countdown_reports_increasing_progress_before_its_result(summary: dict[str, Any]) -> None:
    countdown = summary["extras"]["countdown"]
    assert "error" not in countdown, countdown["error"]
    assert not countdown["result"].get("isError", False)
    progress = countdown["progress"]
    assert progress and progress == sorted(set(progress)), progress
    assert countdown["progressAfterResponse"] == 0


def test_server_exits_by_itself_when_stdin_closes(summary: dict[str, Any]) -> None:
    # The SDK closes the server's stdin, waits up to 2 s, then kills the process group.
    assert summary["shutdownSeconds"] < 2.0, "the server did not exit on end of input; the client had to kill it"


# --- handshake era ------------------------------------------------------------------------------


def test_legacy_negotiates_a_2025_version_by_initialize(legacy_summary: dict[str, Any]) -> None:
    assert legacy_summary["era"] == "handshake"
    assert legacy_summary["protocolVersion"].startswith("2025-")
    sent = [frame["method"] for frame in legacy_summary["sent"]]
    assert sent[:2] == ["initialize", "notifications/initialized"]
    assert "server/discover" not in sent


def test_legacy_results_carry_no_modern_fields(legacy_summary: dict[str, Any]) -> None:
    # The SDK silently drops these on a handshake-era session, so only this check catches them.
    results = {name: legacy_summary[name] for name in ("initializeResult", *CACHEABLE, "prompt")}
    results.update({f"calls.{k}": v for k, v in legacy_summary["calls"].items()})
    results.update({f"reads.{k}": v for k, v in legacy_summary["reads"].items()})
    if "error" not in legacy_summary["extras"]["fail"]:  # test_fail_reports_... says why it is missing
        results["calls.fail"] = legacy_summary["extras"]["fail"]
    for name, result in results.items():
        leaked = {"resultType", "ttlMs", "cacheScope"} & set(result)
        assert not leaked, f"{name} carries modern-only fields {leaked}"


# --- 2026-07-28 era -----------------------------------------------------------------------------


def test_modern_mode_discovers_and_adopts_2026_07_28(probe_summary: dict[str, Any]) -> None:
    assert probe_summary["era"] == "modern"
    assert probe_summary["protocolVersion"] == "2026-07-28"
    sent = [frame["method"] for frame in probe_summary["sent"]]
    assert sent[0] == "server/discover"
    assert "initialize" not in sent
    discover = probe_summary["discoverResult"]
    assert discover["supportedVersions"] == ["2026-07-28"]
    assert discover["resultType"] == "complete"
    assert discover["ttlMs"] >= 0 and discover["cacheScope"] in ("public", "private")
    assert "io.modelcontextprotocol/serverInfo" in discover.get("_meta", {})


def test_modern_requests_all_carry_the_envelope(modern_summary: dict[str, Any]) -> None:
    assert modern_summary["protocolVersion"] == "2026-07-28"
    requests = [frame for frame in modern_summary["sent"] if frame["id"] is not None]
    assert requests and all(ENVELOPE_KEYS <= set(frame["metaKeys"]) for frame in requests), requests


def test_modern_results_carry_result_type_and_cache_hints(modern_summary: dict[str, Any]) -> None:
    results = {name: modern_summary[name] for name in (*CACHEABLE, "prompt")}
    results.update({f"calls.{k}": v for k, v in modern_summary["calls"].items()})
    results.update({f"reads.{k}": v for k, v in modern_summary["reads"].items()})
    if "error" not in modern_summary["extras"]["fail"]:  # test_fail_reports_... says why it is missing
        results["calls.fail"] = modern_summary["extras"]["fail"]
    for name, result in results.items():
        assert result.get("resultType") == "complete", name
        assert "io.modelcontextprotocol/serverInfo" in result.get("_meta", {}), name
        if name in CACHEABLE or name.startswith("reads."):
            assert isinstance(result.get("ttlMs"), int) and result["ttlMs"] >= 0, name
            assert result.get("cacheScope") in ("public", "private"), name


def test_modern_listen_is_acknowledged(modern_summary: dict[str, Any]) -> None:
    listen = modern_summary["listen"]
    assert "error" not in listen, f"client.listen() failed: {listen['error']}"
    assert listen["honored"].get("toolsListChanged") is True, listen
    acks = [
        n
        for n in modern_summary["notifications"]
        if n["method"] == "notifications/subscriptions/acknowledged"
        and n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen["subscriptionId"]
    ]
    assert len(acks) == 1, modern_summary["notifications"]


def test_pinned_mode_opens_with_an_enveloped_request(summary_for: Any) -> None:
    pinned = summary_for("pinned")
    assert pinned["protocolVersion"] == "2026-07-28"
    sent = [frame["method"] for frame in pinned["sent"]]
    assert sent[0] == "tools/list"
    assert "initialize" not in sent and "server/discover" not in sent
