"""The official MCP conformance suite against mcpsync, in both protocol eras.

The suite (npm @modelcontextprotocol/conformance 0.2.0-alpha.12) tests servers over Streamable HTTP
only. ``scripts/conformance URL`` installs it with a Node 22 into ``.peers-conformance/suite/``
(gitignored), runs every server scenario once per era
(2025-11-25, then 2026-07-28) and ends with ``conformance: N passed, M failed``. The server under test
is ``integration/conformance/fixture.py``, which has every tool, prompt and resource the scenarios
call. Three legs:

1. mcpsync's own HTTP transport: ``python -m mcpsync serve --http 127.0.0.1:PORT fixture.py``,
   known failures in ``integration/conformance/known-failures.txt``.
2. mcpsync's stdio transport bridged to HTTP by the npm package supergateway (pinned, installed in
   ``.peers-conformance/supergateway/`` by ``integration/conformance/peers-supergateway``), known failures (the
   bridge's own artefacts) in ``known-failures-supergateway.txt``.
3. The tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) over mcpsync's own HTTP
   transport: the suite's ten ``tasks-*`` scenarios (``scripts/conformance URL --era none --tasks``),
   with no known failures. Not over supergateway: it starts a process per 2026-07-28 request, and a
   task lives in the process that made it.

Each leg must exit 0 (no FAILURE outside its known failures) and must have run its scenarios (both
eras; the ten tasks ones, only ``tasks-status-notifications`` skipped, by the suite itself, pending
its rewrite); the first two must not carry stale known failures: an entry whose checks all pass is
an error, so the lists shrink as mcpsync grows. A missing Node or npm fails, saying what to install;
nothing is skipped.

A quick stdio check (no network) comes first: the fixture loads and serves every probe in both eras.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from wire import REPO_ROOT, EraClient, ServerProcess, base_env, serve_argv

pytestmark = pytest.mark.timeout(900)

CONFORMANCE = REPO_ROOT / "integration" / "conformance"
FIXTURE = CONFORMANCE / "fixture.py"
KNOWN_FAILURES = CONFORMANCE / "known-failures.txt"
KNOWN_FAILURES_SUPERGATEWAY = CONFORMANCE / "known-failures-supergateway.txt"
UNSCORED_SUPERGATEWAY = CONFORMANCE / "unscored-supergateway.txt"
PEERS_SUPERGATEWAY = CONFORMANCE / "peers-supergateway"
RUNNER = REPO_ROOT / "scripts" / "conformance"

ERAS = ("2025-11-25", "2026-07-28")
MCP_PATH = "/mcp"  # where both mcpsync's HTTP transport and supergateway serve the endpoint
# Scenarios the suite runs per era (`conformance list --server`, --suite all, this version): 33 and 40.
# A leg that reports fewer ran short (a harness crash, a scenario that never wrote checks.json).
MIN_SCENARIOS = {"2025-11-25": 33, "2026-07-28": 40}
TASKS = "tasks"  # scripts/conformance's tasks leg: its results folder
TASKS_SCENARIOS = 10  # the suite's tasks-* extension scenarios (`conformance list --server`)
SKIPPED_BY_THE_SUITE = {"tasks-status-notifications"}  # pending the suite's subscriptions/listen rewrite

START_TIMEOUT = 30.0  # until the server's port accepts connections
RUN_TIMEOUT = 800.0  # scripts/conformance: ~20 s of installs the first time, then two harness runs (600 s cap each)
INSTALL_TIMEOUT = 320.0  # peers-supergateway bounds its npm install at 300 s itself

CLOSING_LINE = re.compile(r"^conformance: (\d+) passed, (\d+) failed$", re.MULTILINE)

TOOLS = {
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
    "test_tool_with_progress",
    "test_tool_with_logging",
    "test_logging_tool",
    "test_reconnection",
    "test_streaming_elicitation",
    "test_missing_capability",
    "json_schema_2020_12_tool",
    "test_x_mcp_header",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
}
PROMPTS = {
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
    "test_input_required_result_prompt",
}
RESOURCES = {"test://static-text", "test://static-binary", "test://watched-resource"}
TEMPLATES = {"test://template/{id}/data"}


# -- the fixture itself, over stdio ------------------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_fixture_serves_every_probe(era: str) -> None:
    with ServerProcess(serve_argv(str(FIXTURE))) as proc:
        client = EraClient(proc, era)
        assert {tool["name"] for tool in client.result("tools/list")["tools"]} == TOOLS
        assert client.result("tools/list")["tools"][0]["name"] == "test_simple_text"  # http-header-validation calls the first with {}
        assert {prompt["name"] for prompt in client.result("prompts/list")["prompts"]} == PROMPTS
        assert {res["uri"] for res in client.result("resources/list")["resources"]} == RESOURCES
        assert {t["uriTemplate"] for t in client.result("resources/templates/list")["resourceTemplates"]} == TEMPLATES
        image = client.call_tool("test_multiple_content_types")["content"]
        assert [block["type"] for block in image] == ["text", "image", "resource"]
        audio = client.call_tool("test_audio_content")["content"][0]
        assert audio["type"] == "audio" and audio["mimeType"] == "audio/wav" and audio["data"]
        read = client.result("resources/read", {"uri": "test://template/123/data"})["contents"][0]
        assert "123" in read["text"] and read["mimeType"] == "application/json"
        binary = client.result("resources/read", {"uri": "test://static-binary"})["contents"][0]
        assert binary["mimeType"] == "image/png" and binary["blob"]
        schema = next(t for t in client.result("tools/list")["tools"] if t["name"] == "json_schema_2020_12_tool")["inputSchema"]
        assert {"$schema", "$defs", "allOf", "if", "then", "else"} <= set(schema)
        if client.modern:
            refused = client.error("tools/call", {"name": "test_missing_capability", "arguments": {}})
            assert refused["code"] == -32021 and refused["data"]["requiredCapabilities"] == {"sampling": {}}
            refused = client.error("tools/call", {"name": "failing_job", "arguments": {}})  # a task only, and no tasks extension
            assert refused["code"] == -32021
            assert refused["data"]["requiredCapabilities"] == {"extensions": {"io.modelcontextprotocol/tasks": {}}}


# -- the suite legs ------------------------------------------------------------------------------------

def test_conformance_over_mcpsync_http(tmp_path: Path) -> None:
    """mcpsync's Streamable HTTP transport, both eras."""
    port = _free_port()
    argv = serve_argv("--http", f"127.0.0.1:{port}", str(FIXTURE))
    with _Background(argv, tmp_path / "server.log", "mcpsync serve --http") as server:
        server.wait_listening(port)
        scenarios = _run_suite(f"http://127.0.0.1:{port}{MCP_PATH}", KNOWN_FAILURES, tmp_path, server)
    # What the bridge leg leaves unscored for its timing is scored here, where one process answers.
    outcome = {f"{scenario}:{check.get('id')}": check.get("status")
               for by_scenario in scenarios.values() for scenario, checks in by_scenario.items() for check in checks}
    not_passing = {entry: outcome.get(entry, "not run") for entry in _entries(UNSCORED_SUPERGATEWAY) if outcome.get(entry) != "SUCCESS"}
    assert not not_passing, f"checks the supergateway leg does not score must pass over mcpsync's HTTP: {not_passing}"


def test_conformance_over_stdio_via_supergateway(tmp_path: Path, bounded: Any) -> None:
    """mcpsync's stdio transport behind supergateway (a stateful Streamable HTTP bridge)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on the PATH; supergateway needs Node.js >= 20 (Debian: apt-get install nodejs npm)", pytrace=False)
    install = bounded([str(PEERS_SUPERGATEWAY)], timeout=INSTALL_TIMEOUT, cwd=REPO_ROOT)
    entry = install.stdout.strip().splitlines()[-1] if install.stdout.strip() else ""
    if install.returncode != 0 or not os.path.isfile(entry):
        pytest.fail(f"{PEERS_SUPERGATEWAY} failed (exit {install.returncode}):\n{install.stderr}", pytrace=False)
    port = _free_port()
    stdio_command = shlex.join(serve_argv(str(FIXTURE)))
    argv = [
        node, entry,
        "--stdio", stdio_command,
        "--outputTransport", "streamableHttp",
        "--stateful",
        "--port", str(port),
        "--streamableHttpPath", MCP_PATH,
        "--logLevel", "none",
    ]
    with _Background(argv, tmp_path / "supergateway.log", "supergateway") as bridge:
        bridge.wait_listening(port)
        _run_suite(f"http://127.0.0.1:{port}{MCP_PATH}", KNOWN_FAILURES_SUPERGATEWAY, tmp_path, bridge, unscored=UNSCORED_SUPERGATEWAY)


def test_tasks_extension_over_mcpsync_http(tmp_path: Path) -> None:
    """The tasks extension's scenarios over mcpsync's Streamable HTTP transport: every check passes,
    nothing is listed as known; the one scenario the suite skips is reported, not passed over."""
    port = _free_port()
    argv = serve_argv("--http", f"127.0.0.1:{port}", str(FIXTURE))
    with _Background(argv, tmp_path / "server.log", "mcpsync serve --http") as server:
        server.wait_listening(port)
        out, report, _ = _run_runner(f"http://127.0.0.1:{port}{MCP_PATH}", ["--era", "none", "--tasks"], tmp_path, server)
    scenarios = _scenario_results(out / TASKS)
    assert len(scenarios) == TASKS_SCENARIOS, f"{len(scenarios)} tasks scenarios reported results, expected {TASKS_SCENARIOS}\n{report}"
    skipped = {name for name, checks in scenarios.items() if all(check.get("status") == "SKIPPED" for check in checks)}
    assert skipped == SKIPPED_BY_THE_SUITE, f"scenarios with every check skipped: {sorted(skipped)}\n{report}"
    for name, checks in scenarios.items():
        if name not in skipped:
            assert any(check.get("status") == "SUCCESS" for check in checks), f"{name}: no check passed\n{report}"


# -- helpers -------------------------------------------------------------------------------------------

def _run_suite(url: str, known_failures: Path, tmp_path: Path, server: "_Background",
               unscored: Path | None = None) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Run both eras' server scenarios against `url` and check the verdict; each era's checks by scenario."""
    options = ["--ignore", str(known_failures), *(["--unscored", str(unscored)] if unscored is not None else [])]
    out, report, passed = _run_runner(url, options, tmp_path, server)
    scenarios = {era: _scenario_results(out / era) for era in ERAS}
    for era in ERAS:
        assert len(scenarios[era]) >= MIN_SCENARIOS[era], (
            f"era {era}: only {len(scenarios[era])} scenarios reported results, expected {MIN_SCENARIOS[era]}\n{report}"
        )
    assert passed > 0, report
    stale = _stale_entries(known_failures, scenarios)
    assert not stale, (
        f"{known_failures.name} lists entries that now pass; remove them:\n  " + "\n  ".join(stale) + f"\n{report}"
    )
    return scenarios


def _run_runner(url: str, options: list[str], tmp_path: Path, server: "_Background") -> tuple[Path, str, int]:
    """Run scripts/conformance against `url` and require exit 0, no unexpected failure and a live
    server; (its results folder, the report to quote, the checks passed)."""
    if shutil.which("npm") is None:
        pytest.fail("npm is not on the PATH: the conformance suite is an npm package (Debian: apt-get install nodejs npm)",
                    pytrace=False)
    out = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, str(RUNNER), url, "--out", str(out), *options],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        output, _ = proc.communicate()
        pytest.fail(f"scripts/conformance timed out after {RUN_TIMEOUT}s\n{output}\n--- server log ---\n{server.log_tail()}", pytrace=False)
    report = f"scripts/conformance exit {proc.returncode}; results in {out}\n{output}\n--- server log ---\n{server.log_tail()}"
    if proc.returncode == 2:
        pytest.fail(f"scripts/conformance could not install or run the suite\n{report}", pytrace=False)
    closing = CLOSING_LINE.findall(output)
    assert closing, f"no closing 'conformance: N passed, M failed' line\n{report}"
    passed, failed = (int(n) for n in closing[-1])
    assert proc.returncode == 0 and failed == 0, f"{failed} unexpected conformance failure(s)\n{report}"
    assert server.running(), f"the server died during the run\n{report}"
    return out, report, passed


def _scenario_results(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """scenario -> its checks, from every folder/server-<scenario>-<time>/checks.json."""
    results: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(glob.glob(str(folder / "server-*" / "checks.json"))):
        scenario = re.sub(r"^server-(.*)-\d{4}-\d\d-\d\dT.*$", r"\1", os.path.basename(os.path.dirname(path)))
        with open(path, encoding="utf-8") as f:
            results.setdefault(scenario, []).extend(json.load(f))
    return results


def _stale_entries(known_failures: Path, scenarios: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """Entries of a known-failures file that matched no FAILURE or WARNING check in either era."""
    still_failing: set[str] = set()
    for by_scenario in scenarios.values():
        for scenario, checks in by_scenario.items():
            for check in checks:
                if check.get("status") in ("FAILURE", "WARNING"):
                    still_failing.update({scenario, f"{scenario}:{check.get('id')}"})
    return [entry for entry in _entries(known_failures) if entry not in still_failing]


def _entries(path: Path) -> list[str]:
    """The entries of a known-failures or unscored file: one a line, '#' comments."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _Background:
    """A server process in its own session, its output in a log file; the whole group is stopped
    on exit (SIGTERM, then SIGKILL), so no child (supergateway's stdio servers) outlives the test."""

    def __init__(self, argv: list[str], log_path: Path, what: str) -> None:
        self.argv = argv
        self.log_path = log_path
        self.what = what
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "_Background":
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            self.argv,
            cwd=REPO_ROOT,
            env=base_env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self.proc is not None
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self._log.close()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        self._log.flush()
        return self.log_path.read_bytes()[-chars:].decode("utf-8", "replace")

    def wait_listening(self, port: int) -> None:
        """Until the port accepts a connection; fail at once, quoting the log, if the process exits."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not self.running():
                assert self.proc is not None
                output = self.log_tail()
                hint = ""
                if "No such option" in output and "--http" in output:
                    hint = "mcpsync serve has no --http option: the Streamable HTTP transport has not landed yet\n"
                pytest.fail(
                    f"{hint}{self.what} exited with status {self.proc.returncode} before listening on port {port}\n"
                    f"command: {shlex.join(self.argv)}\n--- its output ---\n{output}",
                    pytrace=False,
                )
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)  # polling the port: another process starting to listen signals nothing here
        pytest.fail(
            f"{self.what} did not listen on port {port} within {START_TIMEOUT}s\ncommand: {shlex.join(self.argv)}\n"
            f"--- its output ---\n{self.log_tail()}",
            pytrace=False,
        )
