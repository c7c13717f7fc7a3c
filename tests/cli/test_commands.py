"""Every `mcpsync` command's options and errors, through click's `CliRunner`, in-process.

What a user types wrong must fail before anything starts, with exit status 2 (click's usage error)
and a message naming the option; `integration/test_cli*.py` runs the same commands as real
processes for what they serve and print. The client commands here talk to a real `mcpsync serve`
child (the demo), so their exit statuses (0, 1 for a tool's error, 3 for a failed call) are the
real ones, and the suite's thread guard checks that an in-process client leaves no thread behind.
"""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner, Result

from mcpsync import __version__
from mcpsync.cli import cli

from ._serving import REPO_ROOT

DEMO = ["--", sys.executable, "-m", "mcpsync", "serve"]
COMMANDS = ("serve", "tools", "call", "listen")


@pytest.fixture(autouse=True)
def importable_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo child runs `python -m mcpsync` from this checkout."""
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="mcpsync", catch_exceptions=False)


def usage_error(result: Result, *words: str) -> None:
    """Exit 2 with click's usage message naming every word, and nothing on stdout."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    assert result.stdout == "", result.stdout
    assert "Error:" in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


# -- the group ------------------------------------------------------------------------------------

def test_version_prints_the_package_version() -> None:
    result = run("--version")
    assert result.exit_code == 0 and result.stdout == f"mcpsync, version {__version__}\n"


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_lists_every_command(flag: str) -> None:
    result = run(flag)
    assert result.exit_code == 0
    for command in COMMANDS:
        assert f"  {command} " in result.stdout, result.stdout


def test_an_unknown_command_is_a_usage_error() -> None:
    usage_error(run("srve"), "No such command 'srve'")


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help_with_examples(command: str) -> None:
    result = run(command, "-h")
    assert result.exit_code == 0 and result.stdout.startswith(f"Usage: mcpsync {command} ")
    assert "Examples:" in result.stdout


# -- serve: what it refuses before serving ----------------------------------------------------------

@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--max-frame-bytes", "10"], ["--max-frame-bytes", "1024"]),
        (["--max-frame-bytes", "lots"], ["--max-frame-bytes", "'lots' is not a valid integer"]),
        (["--workers", "0"], ["--workers", "x>=1"]),
        (["--page-size", "0"], ["--page-size", "x>=1"]),
        (["--log-level", "loud"], ["--log-level", "'loud' is not one of"]),
        (["--threads", "1"], ["--threads", "x>=2"]),
        (["--max-streams", "0"], ["--max-streams"]),
        (["--request-timeout", "0"], ["--request-timeout", "x>=0.1"]),
        (["--session-timeout", "0.5"], ["--session-timeout", "x>=1"]),
        (["--keepalive", "0"], ["--keepalive", "x>=0.05"]),
        (["--http", "8000"], ["--http", "HOST:PORT"]),
        (["--http", "localhost:port"], ["--http", "HOST:PORT"]),
        (["--config"], ["--config", "requires an argument"]),
        (["--no-such-option"], ["No such option", "--no-such-option"]),
        (["a.py", "b.py"], ["unexpected extra argument"]),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) and value and value[0].startswith("-") else None,
)
def test_serve_refuses_bad_options_before_serving(args: list[str], words: list[str]) -> None:
    usage_error(run("serve", *args), *words)


def test_serve_names_a_config_file_that_does_not_exist(tmp_path) -> None:
    missing = tmp_path / "nope.toml"
    result = run("serve", "--config", str(missing))
    assert result.exit_code == 1 and result.stdout == ""
    assert str(missing) in result.stderr, result.stderr


def test_serve_names_a_config_key_it_does_not_know(tmp_path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('[upstreams.files]\ncommand = ["true"]\nroot = ["file:///tmp"]\n')
    result = run("serve", "--config", str(config))
    assert result.exit_code == 1 and result.stdout == ""
    assert "gateway.toml" in result.stderr and "root" in result.stderr, result.stderr


# -- the client commands: usage errors -----------------------------------------------------------------

@pytest.mark.parametrize("command", ["tools", "listen"])
def test_a_client_command_needs_a_server(command: str) -> None:
    usage_error(run(command), "Missing argument", "URL | -- COMMAND...")


def test_call_needs_a_tool_and_a_server() -> None:
    usage_error(run("call"), "Missing argument 'TOOL'")
    usage_error(run("call", "echo"), "Missing argument", "URL | -- COMMAND...")


@pytest.mark.parametrize(("value", "words"), [("{", ["--args", "not JSON"]), ("[1, 2]", ["--args", "must be a JSON object"])])
def test_call_args_must_be_a_json_object(value: str, words: list[str]) -> None:
    usage_error(run("call", "echo", "--args", value, *DEMO), *words)


@pytest.mark.parametrize(
    ("command", "args", "words"),
    [
        ("tools", ["--mode", "newest"], ["--mode", "'newest' is not one of"]),
        ("tools", ["--timeout", "0"], ["--timeout", "x>=0.1"]),
        ("call", ["echo", "--timeout", "soon"], ["--timeout", "'soon' is not a valid float"]),
        ("listen", ["--count", "0"], ["--count", "x>=1"]),
    ],
)
def test_client_commands_refuse_bad_options(command: str, args: list[str], words: list[str]) -> None:
    usage_error(run(command, *args, *DEMO), *words)


def test_an_option_missing_its_value_is_a_usage_error() -> None:
    usage_error(run("listen", "http://127.0.0.1:1/mcp", "--resource"), "--resource", "requires an argument")


# -- the client commands against the demo -------------------------------------------------------------

@pytest.mark.timeout(60)
def test_tools_lists_the_demo_and_json_gives_the_definitions() -> None:
    listed = run("tools", *DEMO)
    assert listed.exit_code == 0, listed.stderr
    assert any(line.startswith("echo ") for line in listed.stdout.splitlines()), listed.stdout
    as_json = run("tools", "--json", "--mode", "legacy", *DEMO)
    assert as_json.exit_code == 0, as_json.stderr
    assert "echo" in {tool["name"] for tool in json.loads(as_json.stdout)}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_call_prints_the_result_and_exits_0(mode: str) -> None:
    result = run("call", "add", "--args", '{"a": 2, "b": 3}', "--mode", mode, *DEMO)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "5\n"


@pytest.mark.timeout(60)
def test_call_of_invalid_arguments_exits_1_with_the_text_the_model_reads() -> None:
    result = run("call", "add", "--args", '{"a": "two", "b": 3}', "--json", *DEMO)
    assert result.exit_code == 1, result.stderr
    printed = json.loads(result.stdout)
    assert printed["isError"] is True and "'a'" in printed["content"][0]["text"], printed


@pytest.mark.timeout(60)
def test_call_of_an_unknown_tool_exits_3_naming_it_on_stderr() -> None:
    result = run("call", "subtract", *DEMO)
    assert result.exit_code == 3 and result.stdout == ""
    assert "subtract" in result.stderr, result.stderr


@pytest.mark.timeout(60)
def test_a_server_command_that_does_not_exist_exits_3() -> None:
    result = run("tools", "--", "/nonexistent/mcp-server")
    assert result.exit_code == 3 and result.stdout == ""
    assert "/nonexistent/mcp-server" in result.stderr, result.stderr
