"""Tool-list changes reach the *official* Python SDK client, in both eras, from
``mcpsync serve integration/dynamic_app.py``.

Each mode runs ``sdk_listen_driver.py`` once (peers venv, separate process; see its docstring for
the scenario) and the tests below judge its summary:

* 2026-07-28 (``modern``: ``mode="auto"`` and discover must have been used; ``pinned``:
  ``mode="2026-07-28"``): ``client.listen(tools_list_changed=True)`` is acknowledged; ``add_tool``
  makes the server send ``notifications/tools/list_changed`` tagged with the listen id *before* the
  call's result on the wire; the listen iterator yields ``ToolsListChanged``; the re-list goes to the
  wire (``ttlMs`` 0: no cache hit) and names ``dyn_1``; ``dyn_1`` answers "dyn_1". Leaving the
  listen block sends ``notifications/cancelled`` for the listen id, after which a second
  ``add_tool`` brings nothing tagged with (or answering) that id.
* ``legacy`` (initialize handshake): the same change arrives as an *untagged*
  ``notifications/tools/list_changed`` before the result, reaches the SDK's message handler, and the
  re-list names ``dyn_1``.

The order is the order the SDK's transport read the frames (a tap around ``stdio_client``), which
is the order mcpsync wrote them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_listen_driver.py")
APP = Path(__file__).with_name("dynamic_app.py")
SERVER_CMD = [sys.executable, "-m", "mcpsync", "serve", str(APP)]
MODES = ["legacy", "modern", "pinned"]
MODERN_MODES = ["modern", "pinned"]
DRIVER_TIMEOUT = 60.0  # the driver bounds itself at 30 s (+15 s watchdog); this is the backstop
STATIC_TOOLS = {"echo", "add_tool", "remove_tool", "touch"}


@pytest.fixture(scope="module")
def summary_for(peers_python: str, bounded: Any, repo_root: Path) -> Any:
    """mode -> the driver's summary, one run per mode per module. The driver prints its summary
    even when a step failed, so each test judges its own part; a run without a summary fails all."""
    runs: dict[str, Any] = {}

    def get(mode: str) -> dict[str, Any]:
        if mode not in runs:
            args = [peers_python, str(DRIVER), "--mode", mode, "--cwd", str(repo_root), "--", *SERVER_CMD]
            try:
                runs[mode] = bounded(args, timeout=DRIVER_TIMEOUT, cwd=repo_root)
            except pytest.fail.Exception as timed_out:  # remembered: a hang costs one timeout, not one per test
                runs[mode] = timed_out
        result = runs[mode]
        if isinstance(result, BaseException):
            pytest.fail(str(result), pytrace=False)
        try:
            summary = json.loads(result.stdout)
        except ValueError:
            pytest.fail(
                f"sdk_listen_driver ({mode}) printed no summary, exit status {result.returncode}:\n"
                f"{result.stderr[-12000:]}",
                pytrace=False,
            )
        summary["_stderr"] = result.stderr
        summary["_returncode"] = result.returncode
        return summary

    return get


@pytest.fixture(params=MODES)
def summary(request: pytest.FixtureRequest, summary_for: Any) -> dict[str, Any]:
    return summary_for(request.param)


@pytest.fixture(params=MODERN_MODES)
def modern(request: pytest.FixtureRequest, summary_for: Any) -> dict[str, Any]:
    return summary_for(request.param)


@pytest.fixture
def legacy(summary_for: Any) -> dict[str, Any]:
    return summary_for("legacy")


def part(summary: dict[str, Any], *keys: str) -> Any:
    """summary[k1][k2]..., failing with the driver's errors and stderr tail when a step did not get there."""
    value: Any = summary
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            pytest.fail(
                f"{summary['mode']}: the driver recorded no {'.'.join(keys)}; errors: {summary['errors']}\n"
                f"{summary['_stderr'][-8000:]}",
                pytrace=False,
            )
        value = value[key]
    return value


# --- every mode ---------------------------------------------------------------------------------


def test_the_driver_completed_every_step(summary: dict[str, Any]) -> None:
    assert summary["errors"] == [], summary["_stderr"][-8000:]
    assert summary["_returncode"] == 0


def test_add_tool_returns_the_new_tools_name(summary: dict[str, Any]) -> None:
    assert STATIC_TOOLS <= set(part(summary, "toolsBefore"))
    assert "dyn_1" not in part(summary, "toolsBefore")
    add = part(summary, "add")
    assert add["text"] == ["dyn_1"]
    assert not add["result"].get("isError", False)


def test_exactly_one_tools_list_changed_arrives_before_the_add_tool_result(summary: dict[str, Any]) -> None:
    changed = part(summary, "add", "changed")
    assert len(changed) == 1, f"expected one tools/list_changed for one add_tool, saw {changed}"
    assert changed[0]["beforeResult"], f"list_changed came after the add_tool result: {summary['wire']}"


def test_relist_goes_to_the_wire_and_shows_the_new_tool(summary: dict[str, Any]) -> None:
    relist = part(summary, "relist")
    assert relist["requestsSent"] == 1, "the SDK served the re-list from its cache instead of asking the server"
    assert set(relist["tools"]) == STATIC_TOOLS | {"dyn_1"}


def test_the_new_tool_is_callable(summary: dict[str, Any]) -> None:
    call = part(summary, "dynamicCall")
    assert call == {"name": "dyn_1", "text": ["dyn_1"], "isError": False}


def test_the_sdk_message_handler_saw_the_change(summary: dict[str, Any]) -> None:
    # 2026-07-28: the tagged event also tees to message_handler (which also evicts the SDK's cache).
    assert part(summary, "handlerNotifications").count("notifications/tools/list_changed") >= 1


# --- 2026-07-28 ---------------------------------------------------------------------------------


def test_modern_modes_run_2026_07_28(modern: dict[str, Any]) -> None:
    assert part(modern, "protocolVersion") == "2026-07-28"
    assert part(modern, "era") == "modern"
    if modern["mode"] == "modern":
        assert modern["discoverSent"], "mode=auto never sent server/discover"
        assert modern["wire"][0][:2] == ["out", "server/discover"]
        assert part(modern, "serverCapabilities", "tools", "listChanged") is True


def test_tool_lists_are_not_cacheable(modern: dict[str, Any]) -> None:
    assert part(modern, "ttlMs") == 0
    unchanged = part(modern, "unchangedRelist")
    assert unchanged["requestsSent"] == 1, "with ttlMs 0 the SDK must not answer a re-list from its cache"
    assert unchanged["ttlMs"] == 0
    assert part(modern, "relist", "ttlMs") == 0


def test_listen_is_acknowledged_with_the_tools_filter(modern: dict[str, Any]) -> None:
    listen = part(modern, "listen")
    assert listen["honored"] == {"toolsListChanged": True}
    (ack,) = listen["ackFrames"]
    assert ack["notifications"] == {"toolsListChanged": True}


def test_the_change_is_tagged_with_the_listen_id(modern: dict[str, Any]) -> None:
    listen_id = part(modern, "listen", "subscriptionId")
    changed = part(modern, "add", "changed")
    assert [c["subscriptionId"] for c in changed] == [listen_id], (
        f"expected only a tools/list_changed tagged {listen_id!r} (no untagged copy in 2026-07-28): {changed}"
    )
    assert all(c["beforeResult"] for c in changed)


def test_the_listen_iterator_yields_the_change(modern: dict[str, Any]) -> None:
    assert part(modern, "iteratorEvent") == "ToolsListChanged"


def test_leaving_listen_cancels_the_listen_request(modern: dict[str, Any]) -> None:
    listen_id = part(modern, "listen", "subscriptionId")
    after = part(modern, "afterLeave")
    assert [frame["requestId"] for frame in after["cancelFrames"]] == [listen_id]
    assert after["cancelBeforeNextRequest"]


def test_nothing_with_the_old_listen_id_after_cancelling(modern: dict[str, Any]) -> None:
    after = part(modern, "afterLeave")
    add = after["add"]
    # The second add_tool does change the list (so a live subscription would have been told) ...
    assert add["text"] == ["dyn_2"]
    # ... but the cancelled one hears nothing: no tagged frame, no untagged one (2026-07-28), and no
    # response to the cancelled listen request, before that call's result or at all.
    assert after["taggedWithOldId"] == [], after["taggedWithOldId"]
    assert add["changed"] == [], add["changed"]
    assert [r for r in after["listenResponses"] if r["afterCancel"]] == []


# --- handshake era ------------------------------------------------------------------------------


def test_legacy_runs_the_handshake(legacy: dict[str, Any]) -> None:
    assert part(legacy, "era") == "handshake"
    assert part(legacy, "protocolVersion").startswith("2025-")
    sent = [frame[1] for frame in legacy["wire"] if frame[0] == "out"]
    assert sent[:2] == ["initialize", "notifications/initialized"]
    assert part(legacy, "serverCapabilities", "tools", "listChanged") is True


def test_legacy_change_is_untagged(legacy: dict[str, Any]) -> None:
    changed = part(legacy, "add", "changed")
    assert [c["subscriptionId"] for c in changed] == [None], changed
    assert not any(frame[1] == "subscriptions/listen" for frame in legacy["wire"])
