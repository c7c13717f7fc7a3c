"""The gateway over real processes: `mcpsync serve --upstream CMD` and `--config FILE` in front of
other MCP servers (mcpsync's dynamic_app, the demo, fixtures/upstream_app.py and the handshake-only
fixtures/upstream_handshake.py).

What a client of the gateway must notice: the upstreams' entries merged with the local ones (local
first, then the first upstream, with a warning naming what is shadowed), prefixes and allow/deny
lists, calls forwarded with the client's ids, progress tokens and cancels, each upstream spoken to
in its own era, upstream changes relayed on the client's own listen routing and ahead of the result
of the call that caused them, and upstreams that crash or never start leaving the gateway serving.

Ordering comes from responses and notifications, never from sleeping; every wait is bounded.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wire import (
    REPO_ROOT,
    GatewayClient as Client,
    ServerProcess,
    base_env,
    fixture,
    has_traceback,
    is_notification,
    is_response,
    serve_argv,
    tools_changed,
    upstreams_of,
)

pytestmark = pytest.mark.timeout(90)

SUB = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"
DYNAMIC = str(REPO_ROOT / "integration" / "dynamic_app.py")
DYNAMIC_TOOLS = ["echo", "add_tool", "remove_tool", "touch"]
UPSTREAM_APP = fixture("upstream_app.py")
UPSTREAM_TOOLS = ["echo", "shout", "era", "request_id", "wait_for_cancel", "cancel_report", "pid", "crash"]
SHORT = 0.3  # how long to wait for something that must NOT happen (as in tests/_timeouts.py)
RESTART_WAIT = 15.0  # loss noticed within 1 s, first retry after 0.5 s, a Python child starting


def serve_command(*args: str) -> list[str]:
    """`python -m mcpsync serve ARGS` as a command list (an upstream of the gateway)."""
    return [sys.executable, "-m", "mcpsync", "serve", *args]


def upstream(*args: str) -> str:
    """The same, as one `--upstream` argument."""
    return shlex.join(serve_command(*args))


def gateway(*args: str) -> ServerProcess:
    return ServerProcess(serve_argv(*args))


def running(pid: int) -> bool:
    """True while `pid` is a live (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def assert_clean_exit(proc: ServerProcess, code: int) -> None:
    assert code == 0, proc.stderr_tail()
    assert not has_traceback(proc.stderr_text()), proc.stderr_tail()


# -- the key flow: a change caused by a call, relayed before the call's result --------------------

def test_modern_client_hears_a_tagged_change_before_the_result_and_sigterm_completes_its_listens() -> None:
    with gateway("--upstream", upstream(DYNAMIC), "--log-level", "info") as proc:
        client = Client(proc, "modern")
        upstream_pids = upstreams_of(proc.pid)
        assert len(upstream_pids) == 1
        client.listen("7", toolsListChanged=True)
        client.listen(7, toolsListChanged=True)
        assert client.tool_names() == DYNAMIC_TOOLS
        response = proc.request("tools/call", client.params({"name": "add_tool", "arguments": {}}), id="call")
        assert response["result"]["content"] == [{"type": "text", "text": "dyn_1"}]
        # Both subscriptions heard it, each under its own id with its JSON type, before the result;
        # never the untagged copy (this connection never initialized), never the upstream's own tag.
        assert proc.notifications == [
            {"jsonrpc": "2.0", "method": TOOLS_CHANGED, "params": {"_meta": {SUB: "7"}}},
            {"jsonrpc": "2.0", "method": TOOLS_CHANGED, "params": {"_meta": {SUB: 7}}},
        ]
        assert client.tool_names() == [*DYNAMIC_TOOLS, "dyn_1"]
        assert client.text("dyn_1") == "dyn_1"
        proc.signal(signal.SIGTERM)
        code = proc.wait_exit()
        completes = {json.dumps(f["id"]): f["result"] for f in proc.drain() if is_response(f)}
        assert_clean_exit(proc, code)
        assert set(completes) == {'"7"', "7"}
        for key, result in completes.items():
            assert result["resultType"] == "complete"
            assert result["_meta"][SUB] == json.loads(key) and type(result["_meta"][SUB]) is type(json.loads(key))
        assert "upstream 'upstream1' connected (modern era)" in proc.stderr_text()
        assert not any(running(pid) for pid in upstream_pids), "the upstream outlived the gateway"


def test_handshake_client_hears_an_untagged_change_before_the_result() -> None:
    with gateway("--upstream", upstream(DYNAMIC)) as proc:
        client = Client(proc, "handshake")
        assert client.tool_names() == DYNAMIC_TOOLS
        response = proc.request("tools/call", {"name": "add_tool", "arguments": {}}, id="call")
        assert response["result"] == {"content": [{"type": "text", "text": "dyn_1"}], "isError": False}
        assert proc.notifications == [{"jsonrpc": "2.0", "method": TOOLS_CHANGED}]
        assert client.tool_names() == [*DYNAMIC_TOOLS, "dyn_1"]
        assert client.text("dyn_1") == "dyn_1"
        assert client.text("remove_tool", {"name": "dyn_1"}) == "dyn_1"
        assert proc.notifications == [{"jsonrpc": "2.0", "method": TOOLS_CHANGED}]
        assert client.tool_names() == DYNAMIC_TOOLS
        code, rest = proc.finish()
        assert_clean_exit(proc, code)
        assert rest == []


def test_a_modern_connection_without_a_listen_hears_no_change() -> None:
    with gateway("--upstream", upstream(DYNAMIC)) as proc:
        client = Client(proc, "modern")
        assert client.text("add_tool") == "dyn_1"
        assert proc.notifications == []
        assert client.tool_names() == [*DYNAMIC_TOOLS, "dyn_1"]
        assert proc.notifications == []


# -- an upstream from before 2026-07-28 -----------------------------------------------------------

def test_a_handshake_only_upstream_is_spoken_to_in_its_era_and_its_changes_refresh_once(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"legacy": {"command": sys.executable, "args": [fixture("upstream_handshake.py")]}}}))
    with gateway("--config", str(config), "--log-level", "info") as proc:
        client = Client(proc, "modern")
        client.listen("changes", toolsListChanged=True)
        assert client.tool_names() == ["legacy_echo", "grow", "stats"]
        assert client.text("legacy_echo", {"text": "hi"}) == "legacy: hi"
        proc.send(client.call_frame("grow", "grow"))
        # The change arrives first; re-listing on it (while the call's result may still be on its way)
        # already sees the new tool: the upstream's entries were invalidated before the relay.
        change = proc.expect(tools_changed, what="the relayed change")
        assert change["params"] == {"_meta": {SUB: "changes"}}
        relist = client.frame("relist", "tools/list")
        proc.send(relist)
        listed = proc.expect(lambda f: is_response(f, "relist"), what="the re-list")
        assert [tool["name"] for tool in listed["result"]["tools"]] == ["legacy_echo", "grow", "stats", "grown_1"]
        grown = proc.expect(lambda f: is_response(f, "grow"), what="the grow result")
        assert grown["result"]["content"] == [{"type": "text", "text": "grown_1"}]
        assert client.tool_names() == ["legacy_echo", "grow", "stats", "grown_1"]  # served from the cache
        assert client.text("grown_1") == "grown_1"
        stats = json.loads(client.text("stats"))
        assert stats["methods"][:2] == ["server/discover", "initialize"], "auto mode probes, then falls back"
        assert "subscriptions/listen" not in stats["methods"]
        assert stats["tools_list"] == 2, "one listing before the change and one after, for four tools/list"
        assert "upstream 'legacy' connected (handshake era)" in proc.stderr_text()


def test_calls_arriving_while_the_first_listing_is_in_flight_reach_the_upstream() -> None:
    held = shlex.join([sys.executable, fixture("upstream_handshake.py"), "hold-first-tools-list"])
    with gateway("--upstream", held) as proc:
        client = Client(proc, "handshake")
        proc.send(client.call_frame("a", "legacy_echo", {"text": "a"}))  # one of these two starts the fetch,
        proc.send(client.call_frame("b", "legacy_echo", {"text": "b"}))  # which the upstream holds back
        try:  # an answer now could only be the bug's: the tools are not known yet
            early = proc.expect(lambda f: is_response(f), timeout=SHORT, what="an early answer")
        except AssertionError:
            early = None
        proc.send(client.frame("release", "prompts/list"))  # the upstream answers the held tools/list
        answers = [early] if early is not None else []
        while len(answers) < 2:
            answers.append(proc.expect(lambda f: is_response(f, "a") or is_response(f, "b"), what="the calls' answers"))
        assert sorted(a["result"]["content"][0]["text"] for a in answers if "result" in a) == ["legacy: a", "legacy: b"], answers


# -- forwarding: ids, progress, cancel ------------------------------------------------------------

@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_ids_are_rewritten_upstream_and_restored_with_their_json_type(era: str) -> None:
    with gateway("--upstream", upstream(UPSTREAM_APP)) as proc:
        client = Client(proc, era)
        assert "request_id" in client.tool_names()  # see the xfail below: concurrent first calls
        proc.send(client.call_frame("7", "request_id"))
        proc.send(client.call_frame(7, "request_id"))
        as_string = proc.expect(lambda f: is_response(f, "7"), what='the response to "7"')
        as_number = proc.expect(lambda f: is_response(f, 7), what="the response to 7")
        seen_upstream = [json.loads(r["result"]["content"][0]["text"]) for r in (as_string, as_number)]
        # The upstream saw two ids of the gateway's own (one kind, distinct), not the client's pair.
        assert type(seen_upstream[0]) is type(seen_upstream[1]) and seen_upstream[0] != seen_upstream[1], seen_upstream


@pytest.mark.parametrize("era, token", [("modern", "7"), ("handshake", 7)])
def test_progress_of_the_demo_countdown_upstream_reaches_the_client_under_its_token(era: str, token: Any) -> None:
    with gateway("--upstream", upstream()) as proc:  # the demo server as the upstream
        client = Client(proc, era)
        proc.send(client.call_frame("count", "countdown", {"steps": 3, "delay": 0.01}, progressToken=token))
        response = proc.response("count")
        assert response["result"]["content"] == [{"type": "text", "text": "counted down 3 steps"}]
        progress = [f["params"] for f in proc.notifications if is_notification(f, "notifications/progress")]
        assert progress == [{"progressToken": token, "progress": step, "total": 3, "message": f"step {step} of 3"} for step in (1, 2, 3)]
        assert all(type(p["progressToken"]) is type(token) for p in progress)


@pytest.mark.parametrize("era, call_id", [("modern", 7), ("handshake", "7")])
def test_a_clients_cancel_reaches_the_upstream_tool(era: str, call_id: Any) -> None:
    with gateway("--upstream", upstream(UPSTREAM_APP)) as proc:
        client = Client(proc, era)
        proc.send(client.call_frame(call_id, "wait_for_cancel", progressToken="started"))
        started = proc.expect(lambda f: is_notification(f, "notifications/progress"), what="the upstream tool starting")
        assert started["params"]["message"] == "started"
        proc.cancel(call_id, "the user pressed stop")
        assert client.text("cancel_report") == "cancelled", "the upstream tool never saw the cancel"
        assert client.text("shout", {"text": "still here"}) == "STILL HERE"
        code, rest = proc.finish()
        assert_clean_exit(proc, code)
        leftovers = list(rest) + proc.notifications
        assert not any(is_response(f, call_id) for f in leftovers), "a cancelled request must not be answered"


# -- merging, prefixes, allow/deny, eras per upstream ---------------------------------------------

def test_local_tools_win_then_the_first_upstream_with_warnings_naming_what_is_shadowed() -> None:
    with gateway(DYNAMIC, "--upstream", upstream(UPSTREAM_APP), "--upstream", upstream(UPSTREAM_APP)) as proc:
        client = Client(proc, "handshake")
        assert client.tool_names() == DYNAMIC_TOOLS + [name for name in UPSTREAM_TOOLS if name != "echo"]
        assert client.text("echo", {"text": "hi"}) == "hi", "the local echo must win"
        assert [p["name"] for p in client.result("prompts/list")["prompts"]] == ["upstream_prompt"]
        assert [r["uri"] for r in client.result("resources/list")["resources"]] == ["upstream://info"]
        prompt = client.result("prompts/get", {"name": "upstream_prompt", "arguments": {"topic": "gateways"}})
        assert prompt["messages"][0]["content"]["text"] == "Tell me about gateways (from the upstream)."
        read = client.result("resources/read", {"uri": "upstream://info"})
        assert read["contents"][0]["text"] == "served by the upstream"
        stderr = proc.stderr_text()
        assert "tool 'echo' of upstream 'upstream1' is shadowed by local services" in stderr
        assert "tool 'shout' of upstream 'upstream2' is shadowed by upstream 'upstream1'" in stderr
        assert "prompt 'upstream_prompt' of upstream 'upstream2' is shadowed by upstream 'upstream1'" in stderr
        assert "resource 'upstream://info' of upstream 'upstream2' is shadowed by upstream 'upstream1'" in stderr
        assert stderr.count("tool 'shout' of upstream 'upstream2'") == 1, "one warning per shadowed entry, not per listing"


def test_a_toml_config_gives_each_upstream_its_prefix_filters_and_era(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"""
[server]
name = "gw"

[upstreams.old]
command = {json.dumps(serve_command(UPSTREAM_APP))}
mode = "legacy"
prefix = "old_"
allow = ["era", "shout", "echo"]
deny = ["echo"]

[upstreams.new]
command = {json.dumps(serve_command(UPSTREAM_APP))}
prefix = "new_"
deny = ["crash", "wait_for_cancel", "cancel_report"]
"""
    )
    with gateway(DYNAMIC, "--config", str(config)) as proc:
        client = Client(proc, "handshake")
        assert client.opened["serverInfo"]["name"] == "gw"
        assert client.tool_names() == [
            *DYNAMIC_TOOLS,
            "old_shout",
            "old_era",
            "new_echo",
            "new_shout",
            "new_era",
            "new_request_id",
            "new_pid",
        ]
        assert client.text("old_era") == "handshake 2025-11-25"
        assert client.text("new_era") == "modern 2026-07-28"
        assert client.text("echo", {"text": "x"}) == "x"
        assert client.text("new_echo", {"text": "x"}) == "upstream: x"
        assert client.text("old_shout", {"text": "x"}) == "X"
        for hidden in ("old_echo", "old_pid", "new_crash", "echo_old"):
            error = client.call(hidden)["error"]
            assert error["code"] == -32602 and f"Unknown tool: {hidden}" in error["message"], error
        assert [p["name"] for p in client.result("prompts/list")["prompts"]] == ["old_upstream_prompt", "new_upstream_prompt"]
        got = client.result("prompts/get", {"name": "new_upstream_prompt", "arguments": {"topic": "x"}})
        assert got["messages"][0]["content"]["text"] == "Tell me about x (from the upstream)."
        assert [r["uri"] for r in client.result("resources/list")["resources"]] == ["upstream://info"]  # no prefix for URIs
        assert "resource 'upstream://info' of upstream 'new' is shadowed by upstream 'old'" in proc.stderr_text()


# -- upstreams that die or never start ------------------------------------------------------------

def test_a_crashed_upstream_is_withdrawn_announced_and_restarted() -> None:
    with gateway(DYNAMIC, "--upstream", upstream(UPSTREAM_APP)) as proc:
        client = Client(proc, "modern")
        client.listen("watch", toolsListChanged=True)
        assert client.tool_names() == DYNAMIC_TOOLS + UPSTREAM_TOOLS[1:]
        first_pid = int(client.text("pid"))
        proc.send(client.call_frame("boom", "crash"))
        error = proc.expect(lambda f: is_response(f, "boom"), what="the crash call's answer")["error"]
        assert "upstream 'upstream1'" in error["message"], error
        proc.expect(tools_changed, what="the withdrawal being announced")
        # The restart comes no sooner than the first backoff (0.5 s): these few requests come first.
        heard: list[dict[str, Any]] = []
        assert client.tool_names() == DYNAMIC_TOOLS, "a dead upstream's tools must not be listed"
        heard += proc.notifications
        unavailable = client.call("shout", {"text": "x"})["error"]  # not "Unknown tool": it is coming back
        assert unavailable["code"] == -32603 and unavailable["data"] == {"upstream": "upstream1"}, unavailable
        assert unavailable["message"].startswith("upstream 'upstream1' is unavailable: it is restarting"), unavailable
        heard += proc.notifications
        assert client.text("echo", {"text": "local"}) == "local", "local tools keep working"
        heard += proc.notifications
        if not any(tools_changed(frame) for frame in heard):
            proc.expect(tools_changed, timeout=RESTART_WAIT, what="the restarted upstream being announced")
        assert client.tool_names() == DYNAMIC_TOOLS + UPSTREAM_TOOLS[1:]
        second_pid = int(client.text("pid"))
        assert second_pid != first_pid
        assert client.text("shout", {"text": "back"}) == "BACK"
        assert "upstream 'upstream1' was lost" in proc.stderr_text()
        code, _ = proc.finish()
        assert_clean_exit(proc, code)


@pytest.mark.parametrize(
    "command",
    ["/nonexistent/mcp-server --stdio", shlex.join([sys.executable, "-c", "import sys; sys.exit(3)"])],
    ids=["missing-command", "exits-at-once"],
)
def test_an_upstream_that_cannot_start_leaves_the_local_tools_served(command: str) -> None:
    with gateway(DYNAMIC, "--upstream", command) as proc:
        client = Client(proc, "handshake")
        assert client.tool_names() == DYNAMIC_TOOLS
        assert client.text("echo", {"text": "fine"}) == "fine"
        code, rest = proc.finish()
        assert_clean_exit(proc, code)
        assert rest == []
        stderr = proc.stderr_text()
        assert "WARNING" in stderr and "upstream 'upstream1': cannot connect" in stderr, stderr


# -- configuration errors on the command line -----------------------------------------------------

@pytest.mark.parametrize(
    "name, text, message",
    [
        ("bad.toml", '[upstreams.files]\ncommand = ["npx"]\nmode = "fast"\n', "bad.toml:3: upstreams.files.mode: must be one of auto, legacy, modern"),
        ("bad.json", '{\n  "mcpServers": {\n    "files": {\n      "command": "npx",\n      "args": "-y"\n    }\n  }\n}\n', "bad.json:5: files.args: must be a list of strings"),
    ],
    ids=["toml", "json"],
)
def test_a_bad_config_file_exits_1_with_the_file_line_and_key_on_stderr(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    result = subprocess.run(serve_argv("--config", str(path)), stdin=subprocess.DEVNULL, capture_output=True, text=True, env=base_env(), timeout=30)
    assert result.returncode == 1, result
    assert result.stdout == ""
    assert f"{tmp_path}/{message}" in result.stderr, result.stderr
    assert not has_traceback(result.stderr)


def test_an_empty_upstream_argument_exits_1() -> None:
    result = subprocess.run(serve_argv("--upstream", ""), stdin=subprocess.DEVNULL, capture_output=True, text=True, env=base_env(), timeout=30)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "--upstream needs a command or a URL" in result.stderr


# -- the embedding API --------------------------------------------------------------------------

def test_add_remote_with_a_command_string_fails_at_once() -> None:
    from mcpsync import Server

    server = Server("gw")
    try:
        with pytest.raises(TypeError, match="list"):
            server.add_remote("up", shlex.join(serve_command(UPSTREAM_APP)), timeout=2)
    finally:
        server.close(timeout=1)
