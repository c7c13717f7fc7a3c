"""The `mcpsync serve` command line, run as a real subprocess.

Targets (a file, a file with `:attr`, a `package.module:attr` on PYTHONPATH, factories), failures to
load a target (exit 1, one line on stderr, nothing on stdout), usage errors (exit 2), and the
options a user sees the effect of: --name, --page-size, --log-level, --workers, --help.
"""

from __future__ import annotations

import signal
import subprocess

import pytest

from wire import (
    FIXTURES,
    META_SERVER_INFO,
    EraClient,
    ServerProcess,
    base_env,
    encode,
    fixture,
    has_traceback,
    is_response,
    legacy_init,
    modern_meta,
    serve_argv,
)

pytestmark = pytest.mark.timeout(60)

OPTIONS = ["--name", "--log-level", "--max-frame-bytes", "--workers", "--page-size"]
DEMO_TOOLS = ["echo", "add", "word_stats", "countdown", "fail"]
PKG_ENV = base_env(extra_pythonpath=[str(FIXTURES)])


def run(args: list[str], env: dict | None = None, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(
        serve_argv(*args), stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env or base_env(), timeout=timeout, cwd=str(FIXTURES.parent.parent)
    )


# -- help -----------------------------------------------------------------------------------------

def test_serve_help_lists_every_option() -> None:
    result = run(["--help"])
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for option in OPTIONS:
        assert option in result.stdout, f"{option} missing from --help:\n{result.stdout}"
    assert "TARGET" in result.stdout
    assert "--help" in result.stdout


def test_top_level_help_and_version() -> None:
    import sys

    top = subprocess.run([sys.executable, "-m", "mcpsync", "--help"], capture_output=True, text=True, env=base_env(), timeout=20)
    assert top.returncode == 0 and "serve" in top.stdout
    version = subprocess.run([sys.executable, "-m", "mcpsync", "--version"], capture_output=True, text=True, env=base_env(), timeout=20)
    assert version.returncode == 0 and "mcpsync" in version.stdout


# -- targets --------------------------------------------------------------------------------------

def served_name_and_tools(argv: list[str], env: dict | None = None) -> tuple[str, list[str], ServerProcess]:
    with ServerProcess(argv, env=env) as proc:
        init = legacy_init(proc)
        tools = [tool["name"] for tool in proc.result("tools/list")["tools"]]
        code, rest = proc.finish()
        assert code == 0 and rest == []
        assert not has_traceback(proc.stderr_text())
        return init["serverInfo"]["name"], tools, proc


@pytest.mark.parametrize(
    "target, env, name, tools",
    [
        (fixture("noisy_app.py"), None, "noisy", ["noisy", "read_stdin"]),
        (fixture("toolbox.py"), None, "toolbox", ["block", "release", "wait_cancel", "stubborn", "log_all", "forbidden", "whoami"]),
        (fixture("fixturepkg/apps.py") + ":service", None, "pkg-service", ["hello"]),
        (fixture("fixturepkg/apps.py") + ":server", None, "pkg-server", ["hello"]),
        (fixture("fixturepkg/apps.py") + ":make_service", None, "factory-service", ["hello"]),
        (fixture("fixturepkg/apps.py") + ":make_server", None, "factory-server", ["hello"]),
        ("fixturepkg.apps:service", PKG_ENV, "pkg-service", ["hello"]),
        ("fixturepkg.apps:make_service", PKG_ENV, "factory-service", ["hello"]),
        ("fixturepkg.apps:make_server", PKG_ENV, "factory-server", ["hello"]),
        ("fixturepkg.apps", PKG_ENV, "pkg-server", ["hello"]),
    ],
    ids=["file-service", "file-server", "file-attr-service", "file-attr-server", "file-factory-service",
         "file-factory-server", "module-attr", "module-factory-service", "module-factory-server", "module-single-server"],
)
def test_serve_target(target: str, env: dict | None, name: str, tools: list[str]) -> None:
    served, listed, _ = served_name_and_tools(serve_argv(target), env)
    assert served == name
    assert listed == tools


def test_served_target_tools_work() -> None:
    with ServerProcess(serve_argv("fixturepkg.apps:make_service"), env=PKG_ENV) as proc:
        legacy_init(proc)
        result = proc.result("tools/call", {"name": "hello", "arguments": {"who": "tests"}})
        assert result["content"] == [{"type": "text", "text": "hello tests from factory-service"}]


def test_no_target_serves_the_demo() -> None:
    served, listed, _ = served_name_and_tools(serve_argv())
    assert served == "mcpsync-demo"
    assert listed == DEMO_TOOLS


@pytest.mark.parametrize(
    "target, env, words",
    [
        ("no_such_file.py", None, ["no such file", "no_such_file.py"]),
        ("integration/fixtures/missing/app.py", None, ["no such file"]),
        ("no_such_module_for_mcpsync", None, ["cannot import", "no_such_module_for_mcpsync"]),
        ("fixturepkg.apps:missing", PKG_ENV, ["missing"]),
        ("fixturepkg.apps:not_servable", PKG_ENV, ["not_servable", "not a Server or Service"]),
        ("fixturepkg.apps:returns_int", PKG_ENV, ["returns_int", "not a Server or Service"]),
        ("fixturepkg.apps:explodes", PKG_ENV, ["explodes", "factory exploded"]),
        (fixture("two_services.py"), None, ["several", "first", "second"]),
        (fixture("nothing_here.py"), None, ["no Server or Service"]),
        (fixture("broken_import.py"), None, ["RuntimeError", "boom while importing"]),
    ],
    ids=["missing-file", "missing-dir", "missing-module", "missing-attr", "attr-not-servable", "factory-returns-int",
         "factory-raises", "ambiguous", "empty-module", "import-fails"],
)
def test_bad_target_exits_1_with_one_line_on_stderr_and_nothing_on_stdout(target: str, env: dict | None, words: list[str]) -> None:
    result = run([target], env=env)
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    raised_by_user_code = target.endswith((":explodes", "broken_import.py"))  # then the lines after say where
    assert len(lines) == 1 or (raised_by_user_code and lines[1].startswith("  File ")), f"expected one line on stderr, got:\n{result.stderr}"
    assert lines[0].startswith("Error: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not has_traceback(result.stderr)


def test_a_misspelt_attribute_of_a_file_names_the_file_not_its_import_name(tmp_path) -> None:
    (tmp_path / "notes.py").write_text("from mcpsync import Service\n\nservice = Service('notes')\n")
    result = subprocess.run(
        serve_argv("notes.py:servce"), stdin=subprocess.DEVNULL, capture_output=True, text=True, env=base_env(), timeout=20, cwd=tmp_path
    )
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert result.stderr == "Error: notes.py:servce: notes.py has no attribute 'servce'\n"


@pytest.mark.parametrize(
    "args",
    [["--max-frame-bytes", "10"], ["--workers", "0"], ["--page-size", "0"], ["--log-level", "loud"], ["--no-such-option"], ["a.py", "b.py"]],
    ids=["tiny-frame-limit", "no-workers", "zero-page-size", "bad-log-level", "unknown-option", "two-targets"],
)
def test_usage_errors_exit_2_with_nothing_on_stdout(args: list[str]) -> None:
    result = run(args)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert "Usage:" in result.stderr or "Error" in result.stderr
    assert not has_traceback(result.stderr)


def test_output_while_loading_the_target_does_not_reach_the_wire() -> None:
    with ServerProcess(serve_argv(fixture("chatty_import.py") + ":make_service")) as proc:
        proc.ping()
        code, rest = proc.finish()
        assert code == 0 and rest == []
        assert all(line.startswith(b'{"jsonrpc":"2.0"') for line in proc.lines), proc.lines
        assert b"BANNER" not in proc.raw_stdout
        stderr = proc.stderr_text()
        for banner in ("BANNER printed at import", "BANNER written to fd 1 at import", "BANNER printed by the factory"):
            assert banner in stderr


# -- options --------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", [None, "toolbox.py"], ids=["demo", "server-target"])
def test_name_shows_in_server_info_in_both_eras(target: str | None) -> None:
    extra = [] if target is None else [fixture(target)]
    with ServerProcess(serve_argv(*extra, "--name", "renamed-server")) as proc:
        assert proc.result("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})["serverInfo"]["name"] == "renamed-server"
    with ServerProcess(serve_argv(*extra, "--name", "renamed-server")) as proc:
        discover = proc.result("server/discover", {"_meta": modern_meta()})
        assert discover["_meta"][META_SERVER_INFO]["name"] == "renamed-server"
        listing = proc.result("tools/list", {"_meta": modern_meta()})
        assert listing["_meta"][META_SERVER_INFO]["name"] == "renamed-server"


@pytest.mark.parametrize("era", ["handshake", "modern"])
@pytest.mark.parametrize("target, expected", [(None, DEMO_TOOLS), ("toolbox.py", ["block", "release", "wait_cancel", "stubborn", "log_all", "forbidden", "whoami"])], ids=["demo", "server-target"])
def test_page_size_paginates_tools_list(era: str, target: str | None, expected: list[str]) -> None:
    extra = [] if target is None else [fixture(target)]
    with ServerProcess(serve_argv(*extra, "--page-size", "2")) as proc:
        client = EraClient(proc, era)
        names: list[str] = []
        pages = []
        cursor = None
        for _ in range(10):
            result = client.result("tools/list", {} if cursor is None else {"cursor": cursor})
            pages.append(len(result["tools"]))
            names += [tool["name"] for tool in result["tools"]]
            if client.modern:
                assert result["cacheScope"] in ("public", "private") and "ttlMs" in result
            cursor = result.get("nextCursor")
            if cursor is None:
                break
            assert isinstance(cursor, str)
        assert names == expected
        assert pages == [2] * (len(expected) // 2) + ([1] if len(expected) % 2 else [])
        assert client.error("tools/list", {"cursor": "garbage"})["code"] == -32602


def test_log_level_debug_writes_logs_to_stderr_only() -> None:
    with ServerProcess(serve_argv("--log-level", "debug")) as proc:
        legacy_init(proc)
        proc.send({"jsonrpc": "2.0", "id": 424242, "result": {}})  # a response to nothing: logged at debug
        proc.ping()
        proc.signal(signal.SIGTERM)
        assert proc.wait_exit(5) == 0
        assert proc.drain() == []
    stderr = proc.stderr_text()
    assert "DEBUG" in stderr and "424242" in stderr, stderr
    assert "received SIGTERM" in stderr, stderr
    assert b"DEBUG" not in proc.raw_stdout and b"424242" not in proc.raw_stdout
    for line in proc.lines:
        assert line.startswith(b'{"jsonrpc":"2.0"')


def test_default_log_level_keeps_debug_and_info_off_stderr() -> None:
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc)
        proc.send({"jsonrpc": "2.0", "id": 424242, "result": {}})
        proc.ping()
        proc.signal(signal.SIGTERM)
        assert proc.wait_exit(5) == 0
    assert proc.stderr_text() == ""


def test_workers_1_runs_requests_one_at_a_time() -> None:
    with ServerProcess(serve_argv("--workers", "1")) as proc:
        legacy_init(proc)
        countdown = {"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 3, "delay": 0.02}}}
        echo = {"jsonrpc": "2.0", "id": "fast", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
        proc.write_raw(encode(countdown) + encode(echo))
        responses = []
        while len(responses) < 2:
            frame = proc.recv()
            if is_response(frame):
                responses.append(frame["id"])
        assert responses == ["slow", "fast"]
