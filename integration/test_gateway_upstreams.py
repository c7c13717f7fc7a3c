"""The gateway with real upstreams nobody here wrote, served the way they expect.

The peers are the MCP reference servers from npm, pinned and installed in ``.peers-npm/`` by
``scripts/peers-npm`` (Node, the official TypeScript SDK), plus mcpsync's own demo:

* ``server-filesystem`` started without directory arguments: it asks ``roots/list`` right after
  ``initialize`` (and again on ``notifications/roots/list_changed``) and serves only the
  directories it is given; ``list_allowed_directories`` says which.
* ``server-memory`` through ``npm exec`` (``npm exec → sh → node``, as ``npx`` runs it), for what
  is left running when the gateway closes while an upstream restarts.
* ``server-everything``'s ``trigger-long-running-operation``, a call in flight at SIGTERM.
* ``python -m mcpsync serve`` as an upstream that stops reading (SIGSTOP).

The gateway is ``python -m mcpsync serve`` (or, for ``add_remote(roots=...)``, a three-line
script), driven in raw JSON lines by ``wire.ServerProcess``. No sleep orders anything: the tests
wait on frames, on the gateway's stderr, or poll /proc with a deadline (nothing signals when a
grandchild exits). A missing node/npm or a failed install fails (never skips) these tests.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from wire import ServerProcess, base_env, is_notification, legacy_init, serve_argv, stat_fields, upstreams_of

pytestmark = pytest.mark.timeout(120)

LONG = 20.0
TOOLS_CHANGED = "notifications/tools/list_changed"


# -- processes and groups ---------------------------------------------------------------------------

def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    members = []
    for entry in os.listdir("/proc"):
        fields = stat_fields(int(entry)) if entry.isdigit() else None
        if fields is not None and int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(entry))
    return members


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def poll(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """The first true value of `condition()`, looked at every 10 ms until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)  # what is polled signals nothing: /proc, or an upstream applying its roots in its own time


def server_of(pgid: int) -> int | None:
    """The real server in an upstream's process group: node running server-memory's bin (npm
    itself runs on node too, as `node .../npm exec ...`)."""
    return next((pid for pid in group_members(pgid) if command_line(pid).startswith("node ") and "/.bin/mcp-server-memory" in command_line(pid)), None)


def kill_groups(pgids: set[int]) -> None:
    for pgid in pgids:
        for signum in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.killpg(pgid, signum)
            except ProcessLookupError:
                pass


# -- the downstream's side --------------------------------------------------------------------------

def call_frame(request_id: Any, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def allowed_directories(gateway: ServerProcess, client_roots: list[Path] | None = None) -> list[str]:
    """What the upstream serves now. With `client_roots`, this client answers every `roots/list`
    the gateway asks meanwhile with them, as a real client does: the upstream may ask again at any
    time (a stale ask, or one during this very call), and an unanswered ask would hold it up."""
    request = gateway.request_frame("tools/call", {"name": "list_allowed_directories", "arguments": {}})
    gateway.send(request)
    while True:
        frame = gateway.expect(lambda f: is_roots_request(f) or f.get("id") == request["id"], timeout=LONG,
                               what="the answer to list_allowed_directories")
        if not is_roots_request(frame):
            break
        assert client_roots is not None, f"the gateway asked roots of a client that declared none: {frame}"
        answer_with(gateway, frame, client_roots)
    assert "result" in frame, frame
    result = frame["result"]
    text = result["content"][0]["text"]
    assert text.startswith("Allowed directories:"), result
    return text.splitlines()[1:]


def is_roots_request(frame: dict[str, Any]) -> bool:
    return frame.get("method") == "roots/list" and "id" in frame


def answer_roots(gateway: ServerProcess, directories: list[Path]) -> None:
    """Wait for the gateway to ask this client for its roots, and answer them."""
    answer_with(gateway, gateway.expect(is_roots_request, timeout=LONG, what="the gateway asking for the client's roots"), directories)


def answer_with(gateway: ServerProcess, asked: dict[str, Any], directories: list[Path]) -> None:
    roots = [{"uri": directory.as_uri(), "name": directory.name} for directory in directories]
    gateway.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": roots}})


# -- 1. roots outside a call ------------------------------------------------------------------------

GATEWAY_WITH_ROOTS = """
import json, sys
from mcpsync import Server
server = Server("gateway")
server.add_remote("files", json.loads(sys.argv[1]), roots=json.loads(sys.argv[2]), timeout=30)
server.serve_stdio()
server.close()
"""


def gateway_with_roots(how: str, upstream: list[str], roots: list[str], tmp_path: Path) -> list[str]:
    """A gateway proxying `upstream` with `roots` configured: by `add_remote(roots=...)` in a script
    ("api"), or by the `roots` key of a `mcpsync serve --config` TOML file ("config")."""
    if how == "api":
        script = tmp_path / "gateway.py"
        script.write_text(GATEWAY_WITH_ROOTS)
        return [sys.executable, str(script), json.dumps(upstream), json.dumps(roots)]
    config = tmp_path / "gateway.toml"
    config.write_text(f"[upstreams.files]\ncommand = {json.dumps(upstream)}\nroots = {json.dumps(roots)}\ntimeout = 30\n")
    return serve_argv("--config", str(config))


@pytest.mark.parametrize("how", ["api", "config"])
def test_a_filesystem_upstream_is_given_the_roots_configured_for_it(how: str, node: str, npm_entry: Any, tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    upstream = [node, npm_entry("filesystem")]  # no directory arguments: only roots give it any
    with ServerProcess(gateway_with_roots(how, upstream, [served.as_uri()], tmp_path)) as gateway:
        legacy_init(gateway)  # this client declares no roots: the configured ones are the upstream's
        assert poll(lambda: allowed_directories(gateway) == [os.path.realpath(served)], LONG, "the configured root to be served")
        (served / "note.txt").write_text("from the configured root")
        read = gateway.result("tools/call", {"name": "read_text_file", "arguments": {"path": str(served / "note.txt")}})
        assert read["content"][0]["text"] == "from the configured root", read
        assert "cannot tell which call" not in gateway.stderr_text()


def test_a_filesystem_upstream_is_given_the_clients_roots_and_told_when_they_change(node: str, npm_entry: Any, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    argv = serve_argv("--upstream", shlex.join([node, npm_entry("filesystem")]))
    with ServerProcess(argv) as gateway:
        # Before any client came, the upstream asked roots/list outside a call: it got none, no error.
        assert "cannot tell which call" not in gateway.stderr_text()
        legacy_init(gateway, capabilities={"roots": {"listChanged": True}})
        answer_roots(gateway, [first])  # a client with roots arrived: the upstream asks again
        assert poll(lambda: allowed_directories(gateway, [first]) == [os.path.realpath(first)], LONG, "the client's root to be served")
        gateway.notify("notifications/roots/list_changed")
        answer_roots(gateway, [second])
        assert poll(lambda: allowed_directories(gateway, [second]) == [os.path.realpath(second)], LONG, "the client's new root to be served")


# -- 2. no orphans ----------------------------------------------------------------------------------

def memory_upstreams(tmp_path: Path, repo_root: Path) -> Path:
    """A config with two server-memory upstreams, each through `npm exec` (npm → sh → node)."""
    lines = []
    for name in ("one", "two"):
        command = ["npm", "exec", "--offline", "--prefix", str(repo_root / ".peers-npm"), "--no", "--", "mcp-server-memory"]
        lines += [
            f"[upstreams.{name}]",
            f"command = {json.dumps(command)}",
            f'prefix = "{name}_"',
            f"env = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / (name + '.jsonl')))} }}",
            "",
        ]
    config = tmp_path / "gateway.toml"
    config.write_text("\n".join(lines))
    return config


def test_closing_the_gateway_while_an_upstream_restarts_leaves_no_process_of_it(npm_entry: Any, tmp_path: Path, repo_root: Path) -> None:
    npm_entry("memory")
    config = memory_upstreams(tmp_path, repo_root)
    seen: set[int] = set()
    with ServerProcess(serve_argv("--config", str(config), "--log-level", "info")) as gateway:
        try:
            legacy_init(gateway)
            tools = [tool["name"] for tool in gateway.result("tools/list")["tools"]]
            assert "one_read_graph" in tools and "two_read_graph" in tools, tools
            crashed, other = sorted(upstreams_of(gateway.pid))  # each leads its own process group
            seen |= {crashed, other}
            assert all(os.getpgid(pid) == pid for pid in (crashed, other))
            os.kill(poll(lambda: server_of(crashed), LONG, "the first upstream's server"), signal.SIGKILL)  # the server crashes
            restarted = poll(lambda: next((pid for pid in upstreams_of(gateway.pid) if pid not in seen), None), LONG, "the restart")
            seen.add(restarted)
            # Hold the restarted server mid-start, as a slow machine or a slow npm fetch does: the
            # gateway closes while its supervisor is still connecting it.
            os.kill(poll(lambda: server_of(restarted), LONG, "the restarted server"), signal.SIGSTOP)
            gateway.close_stdin()
            assert gateway.wait_exit(LONG) == 0
            for pgid, what in ((restarted, "the restarted upstream"), (crashed, "the crashed upstream"), (other, "the other upstream")):
                poll(lambda: not group_members(pgid), LONG, f"no process of {what}'s group {pgid} left: {[command_line(p) for p in group_members(pgid)]}")
        finally:
            kill_groups(seen)


# -- 3. honest errors -------------------------------------------------------------------------------

def test_a_call_while_its_upstream_restarts_says_the_upstream_is_unavailable(node: str, npm_entry: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken"  # while it exists, the upstream's restarts fail at once
    script = f'test -e "$0" && {{ echo "upstream start refused" >&2; exit 1; }}; exec {shlex.quote(node)} {shlex.quote(npm_entry("memory"))}'
    config = tmp_path / "gateway.toml"
    config.write_text(
        "[upstreams.memory]\n"
        f"command = {json.dumps(['sh', '-c', script, str(broken)])}\n"
        f"env = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / 'memory.jsonl'))} }}\n"
    )
    with ServerProcess(serve_argv("--config", str(config))) as gateway:
        legacy_init(gateway)
        assert gateway.result("tools/call", {"name": "read_graph", "arguments": {}}).get("isError") in (None, False)
        [child] = upstreams_of(gateway.pid)
        broken.touch()
        os.kill(child, signal.SIGKILL)
        gateway.expect(lambda frame: is_notification(frame, TOOLS_CHANGED), timeout=LONG, what="the lost upstream's tools withdrawn")
        error = gateway.error("tools/call", {"name": "read_graph", "arguments": {}})
        assert error["code"] == -32603, error
        assert error["message"].startswith("upstream 'memory' is unavailable: it is restarting"), error
        assert error["data"] == {"upstream": "memory"}, error
        broken.unlink()
        gateway.expect(lambda frame: is_notification(frame, TOOLS_CHANGED), timeout=LONG * 2, what="the upstream back")
        assert gateway.result("tools/call", {"name": "read_graph", "arguments": {}}).get("isError") in (None, False)


def test_a_call_in_flight_at_sigterm_is_answered_that_the_server_is_shutting_down(node: str, npm_entry: Any) -> None:
    argv = serve_argv("--upstream", shlex.join([node, npm_entry("everything"), "stdio"]))
    with ServerProcess(argv) as gateway:
        legacy_init(gateway)
        gateway.send(call_frame(7, "trigger-long-running-operation", {"duration": 60, "steps": 60}, progressToken="p"))
        gateway.expect(lambda frame: is_notification(frame, "notifications/progress"), timeout=LONG, what="the call under way")
        gateway.signal(signal.SIGTERM)
        response = gateway.response(7, timeout=LONG)
        assert response["error"]["code"] == -32603, response
        assert response["error"]["message"] == "tools/call was cancelled: the server is shutting down", response
        assert gateway.wait_exit(LONG) == 0


# -- 4. the reader never waits on an upstream -------------------------------------------------------

@pytest.fixture
def stopped_upstream() -> Iterator[Callable[[int], None]]:
    """`stop(pid)`: SIGSTOP a process, continued again when the test ends."""
    stopped: list[int] = []

    def stop(pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)

    yield stop
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def test_the_gateway_keeps_answering_while_an_upstream_does_not_read(stopped_upstream: Any) -> None:
    upstream = shlex.join(serve_argv())
    with ServerProcess(serve_argv("--upstream", upstream), env=base_env()) as gateway:
        legacy_init(gateway)
        assert "echo" in [tool["name"] for tool in gateway.result("tools/list")["tools"]]  # known: the reader forwards it itself
        [child] = upstreams_of(gateway.pid)
        stopped_upstream(child)  # it reads nothing from now on
        big = "x" * (1 << 20)  # far more than a pipe holds
        gateway.send(call_frame(1, "echo", {"text": big}))
        gateway.ping(timeout=LONG / 2)  # the reader was not left waiting for room in the upstream's pipe
        gateway.cancel(1, "no longer needed")
        gateway.ping(timeout=LONG / 2)
        os.kill(child, signal.SIGCONT)
        assert gateway.result("tools/call", {"name": "echo", "arguments": {"text": "still here"}})["content"][0]["text"] == "still here"
        code, frames = gateway.finish(LONG)
        assert code == 0
        assert not [frame for frame in frames if frame.get("id") == 1], "a cancelled call was answered"
