"""`mcpsync tools|call|listen -- COMMAND...` run as real subprocesses against `python -m mcpsync serve`.

Exit statuses: 0 success, 1 the tool reported an error (isError) or asked for what the command cannot
give, 2 usage, 3 the call itself failed (cannot start or talk to the server, a JSON-RPC error), 130
interrupted (tests/cli/test_client_errors.py has the errors and the statuses other than 0). `listen` runs against
`integration/fixtures/ticking_app.py`, which changes its tool list on its own once a listen (or, in the
handshake era, a resources/subscribe) has arrived, because one stdio child cannot be changed by a
second client.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading

import pytest

from wire import DEFAULT_TIMEOUT as LONG
from wire import REPO_ROOT, base_env, children_of, fixture

pytestmark = pytest.mark.timeout(60)

MODES = ["auto", "legacy", "modern"]
DEMO_TOOLS = ["echo", "add", "word_stats", "countdown", "fail"]
SERVE = [sys.executable, "-m", "mcpsync", "serve"]
TICKING = [*SERVE, fixture("ticking_app.py")]


def mcpsync_cli(*args: str, env: dict[str, str] | None = None, timeout: float = LONG) -> subprocess.CompletedProcess:
    """Run `python -m mcpsync ARGS` to completion (killed and failed after `timeout`)."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "mcpsync", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env or base_env(),
            cwd=REPO_ROOT,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mcpsync {' '.join(args)} did not finish within {timeout}s; stdout so far: {exc.stdout!r}", pytrace=False)


# -- help -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["tools", "call", "listen"])
def test_help_says_the_server_is_a_url_or_a_command(command: str) -> None:
    result = mcpsync_cli(command, "--help")
    assert result.returncode == 0, result.stderr
    description = result.stdout.split("\n\n", 1)[1].split("Options:")[0]  # past the usage line
    assert "URL" in description and "COMMAND" in description, description
    assert f"mcpsync {command} " in description and " http://" in description, "no URL example"
    listing = mcpsync_cli("--help").stdout
    (line,) = [line for line in listing.splitlines() if line.split()[:1] == [command]]
    assert "URL" in line and "COMMAND" in line, line


# -- tools ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_tools_lists_names_and_summaries(mode: str) -> None:
    result = mcpsync_cli("tools", "--mode", mode, "--", *SERVE)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == DEMO_TOOLS
    assert "Add two integers." in lines[1]
    assert result.stderr == ""


def test_tools_json_prints_the_full_definitions() -> None:
    result = mcpsync_cli("tools", "--json", "--", *SERVE)
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert [tool["name"] for tool in listed] == DEMO_TOOLS
    assert listed[1]["inputSchema"]["required"] == ["a", "b"]


def test_tools_follows_pages() -> None:
    result = mcpsync_cli("tools", "--", *SERVE, "--page-size", "2")
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == DEMO_TOOLS


# -- call -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_call_prints_the_text_and_exits_0(mode: str) -> None:
    result = mcpsync_cli("call", "add", "--args", '{"a": 2, "b": 3}', "--mode", mode, "--", *SERVE)
    assert (result.returncode, result.stdout) == (0, "5\n"), result.stderr


def test_call_json_prints_the_whole_result() -> None:
    result = mcpsync_cli("call", "add", "--json", "--args", '{"a": 2, "b": 3}', "--", *SERVE)
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["structuredContent"] == {"result": 5}
    assert printed["isError"] is False
    assert printed["content"] == [{"type": "text", "text": "5"}]


def test_a_tool_error_exits_1_with_its_text() -> None:
    result = mcpsync_cli("call", "fail", "--args", '{"message": "no luck"}', "--", *SERVE)
    assert (result.returncode, result.stdout) == (1, "no luck\n"), result.stderr


def test_a_tool_error_with_json_exits_1_and_prints_the_result() -> None:
    result = mcpsync_cli("call", "fail", "--json", "--", *SERVE)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["isError"] is True


def test_a_protocol_error_exits_3_with_the_message_on_stderr() -> None:
    result = mcpsync_cli("call", "nosuch", "--", *SERVE)
    assert result.returncode == 3
    assert result.stdout == ""
    assert "Unknown tool: nosuch" in result.stderr


def test_progress_goes_to_stderr_and_the_result_to_stdout() -> None:
    result = mcpsync_cli("call", "countdown", "--args", '{"steps": 2, "delay": 0}', "--", *SERVE)
    assert (result.returncode, result.stdout) == (0, "counted down 2 steps\n"), result.stderr
    assert "progress: 1/2 step 1 of 2" in result.stderr
    assert "progress: 2/2 step 2 of 2" in result.stderr


@pytest.mark.parametrize("bad", ["not json", "[1, 2]"])
def test_bad_args_are_a_usage_error(bad: str) -> None:
    result = mcpsync_cli("call", "add", "--args", bad, "--", *SERVE)
    assert result.returncode == 2
    assert "--args" in result.stderr
    assert result.stdout == ""


def test_a_missing_server_command_is_a_usage_error() -> None:
    result = mcpsync_cli("tools")
    assert result.returncode == 2


@pytest.mark.parametrize(
    "server",
    [["/nonexistent/mcp-server"], [sys.executable, "-c", "pass"]],
    ids=["cannot-start", "exits-at-once"],
)
def test_a_server_that_cannot_be_talked_to_exits_3(server: list[str]) -> None:
    for command in (["tools"], ["call", "echo"], ["listen"]):
        result = mcpsync_cli(*command, "--", *server)
        assert result.returncode == 3, (command, result.stderr)
        assert "cannot talk to" in result.stderr
        assert result.stdout == ""


def test_a_server_that_never_answers_is_bounded_by_timeout() -> None:
    never = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # reads, never writes
    result = mcpsync_cli("tools", "--mode", "legacy", "--timeout", "0.5", "--", *never)
    assert result.returncode == 3
    assert "no answer" in result.stderr


# -- listen ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_listen_count_1_prints_the_change_and_exits_0(mode: str) -> None:
    # --resource: in the handshake era the listen itself is client-side, and the app starts its
    # change when the resources/subscribe arrives (after the client's listener exists).
    result = mcpsync_cli("listen", "--count", "1", "--mode", mode, "--resource", "tick://state", "--", *TICKING)
    assert (result.returncode, result.stdout) == (0, "tools list changed\n"), result.stderr
    era = "handshake" if mode == "legacy" else "modern"
    assert f"listening ({era} era)" in result.stderr


class Streamed:
    """A CLI process whose stdout lines are read as they come (stderr goes to a file)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpsync", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env or base_env(),
            cwd=REPO_ROOT,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="test-cli-stdout")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def line(self) -> str | None:
        """The next stdout line (None at end of output)."""
        try:
            return self.lines.get(timeout=LONG)
        except queue.Empty:
            raise AssertionError(f"no output line within {LONG}s") from None

    def finish(self) -> tuple[int | None, str]:
        """Wait for exit, killing it after LONG (status None then); the exit status and stderr."""
        try:
            code: int | None = self.proc.wait(timeout=LONG)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=LONG)
            code = None
        self._reader.join(LONG)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.seek(0)
        return code, self._stderr.read().decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()
        self._stderr.close()


def test_listen_prints_each_event_as_it_comes_and_ctrl_c_ends_it_cleanly() -> None:
    cli = Streamed("listen", "--", *TICKING)
    try:
        assert cli.line() == "tools list changed\n"
        assert cli.proc.poll() is None, "the listener stopped after one event without --count"
        servers = children_of(cli.proc.pid)
        assert len(servers) == 1
        cli.proc.send_signal(signal.SIGINT)
        code, stderr = cli.finish()
        assert code == 0, stderr
        assert "Traceback" not in stderr
        assert not os.path.exists(f"/proc/{servers[0]}"), "the server outlived the CLI"
    finally:
        cli.close()


def test_listen_without_count_ends_when_the_server_shuts_down() -> None:
    env = base_env(TICKING_SHUTDOWN="1")  # the app adds one tool, then shuts down gracefully
    cli = Streamed("listen", "--", *TICKING, env=env)
    try:
        assert cli.line() == "tools list changed\n"
        code, stderr = cli.finish()
        assert code == 0, f"exit status {code}; stderr: {stderr[-2000:]}"
    finally:
        cli.close()
