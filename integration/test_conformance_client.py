"""The official MCP conformance suite's client scenarios against mcpsync's client, in both eras.

``scripts/conformance --client`` runs the suite's frozen client requirement sets
(``conformance client --requirements 2025-11-25``, then ``2026-07-28``) against
``integration/conformance/client.py``, mcpsync's everything-client (public API only). For each
scenario the suite starts a mock server (and, for ``auth/*``, a fake authorization server), then the
client with the server's URL; the mock judges what the client sent. The requirement set scores 18
and 32 scenarios; the extension ones (``auth/client-credentials-*``, DPoP, ...) and the
added-after-release one run and are reported here, never scored, except that the two extensions
mcpsync implements (the client credentials grant, ``mcpsync.auth.client.client_credentials``) must pass.

The test fails on any FAILURE check of a scored scenario that
``integration/conformance/known-client-failures.txt`` does not list (each entry with its reason; the
goal is none), on a scored scenario that wrote no results, and on a stale entry (one whose checks
all pass now). The suite runs the scenarios of an era in parallel: the whole run takes seconds, the
first one adds about 20 s of installs. A missing npm fails, saying what to install.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from wire import REPO_ROOT

pytestmark = pytest.mark.timeout(170)

RUNNER = REPO_ROOT / "scripts" / "conformance"
KNOWN_FAILURES = REPO_ROOT / "integration" / "conformance" / "known-client-failures.txt"
ERAS = ("2025-11-25", "2026-07-28")
SCORED = {"2025-11-25": 18, "2026-07-28": 32}  # the requirement sets of suite 0.2.0-alpha.12
# Unscored, but implemented by mcpsync (ClientCredentials): they must pass too. DPoP, enterprise-managed
# authorization and workload identity federation are not implemented; they are only reported.
EXTENSIONS_IMPLEMENTED = ("auth/client-credentials-basic", "auth/client-credentials-jwt")
RUN_TIMEOUT = 150.0  # installs (~20 s, first run only) and two harness runs of a few seconds each

SCENARIO_LINE = re.compile(r"^scenario (\S+) (pass|FAIL|none) +(\S+) +(\S+)  \((.*)\)$", re.MULTILINE)
ERA_LINE = re.compile(r"^client (\S+): (\d+) of (\d+) scored scenarios pass$", re.MULTILINE)
CHECK_LINE = re.compile(r"^(FAIL|known|warn|unscored) +(\S+) (FAILURE|WARNING) (\S+?):(\S+)  (.*)$", re.MULTILINE)
CLOSING_LINE = re.compile(r"^conformance: (\d+) passed, (\d+) failed$", re.MULTILINE)


def test_known_failures_each_say_why() -> None:
    for number, line in enumerate(KNOWN_FAILURES.read_text(encoding="utf-8").splitlines(), 1):
        entry, _, reason = line.partition("#")
        if entry.strip():
            assert reason.strip(), f"{KNOWN_FAILURES.name}:{number}: {entry.strip()} has no reason (write it after a #)"


def test_the_client_passes_the_client_requirement_sets(tmp_path: Path) -> None:
    if shutil.which("npm") is None:
        pytest.fail("npm is not on the PATH: the conformance suite is an npm package (Debian: apt-get install nodejs npm)",
                    pytrace=False)
    out = tmp_path / "results"
    output, status = _run([sys.executable, str(RUNNER), "--client", "--ignore", str(KNOWN_FAILURES), "--out", str(out)])
    report = f"scripts/conformance --client exit {status}; results in {out}\n{output}"
    if status == 2:
        pytest.fail(f"scripts/conformance could not install or run the suite\n{report}", pytrace=False)

    scenarios: dict[tuple[str, str], tuple[str, str, str]] = {
        (era, name): (verdict, kind, detail) for era, verdict, kind, name, detail in SCENARIO_LINE.findall(output)
    }
    eras = {era: (int(passing), int(scored)) for era, passing, scored in ERA_LINE.findall(output)}
    print(_extensions_report(scenarios))  # shown with pytest -rP: how the unscored scenarios fare

    for era in ERAS:
        assert era in eras, f"no summary for era {era}\n{report}"
        assert eras[era][1] == SCORED[era], f"era {era} scores {eras[era][1]} scenarios, expected {SCORED[era]}\n{report}"
        silent = [name for (e, name), (verdict, kind, _) in scenarios.items() if e == era and kind == "scored" and verdict == "none"]
        assert not silent, f"era {era}: scored scenarios that wrote no results: {silent}\n{report}"
        for name in EXTENSIONS_IMPLEMENTED:
            verdict = scenarios.get((era, name), ("none", "", ""))[0]
            assert verdict == "pass", f"era {era}: the extension {name}, which mcpsync implements, did not pass ({verdict})\n{report}"
    closing = CLOSING_LINE.findall(output)
    assert closing, f"no closing 'conformance: N passed, M failed' line\n{report}"
    failed = int(closing[-1][1])
    assert status == 0 and failed == 0, f"{failed} unexpected conformance failure(s) in scored client scenarios\n{report}"

    stale = _stale_entries(output)
    assert not stale, f"{KNOWN_FAILURES.name} lists entries that now pass; remove them:\n  " + "\n  ".join(stale) + f"\n{report}"


def _run(argv: list[str]) -> tuple[str, int]:
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        output, _ = proc.communicate()
        pytest.fail(f"scripts/conformance --client ran over {RUN_TIMEOUT} s\n{output}", pytrace=False)
    return output, proc.returncode


def _extensions_report(scenarios: dict[tuple[str, str], tuple[str, str, str]]) -> str:
    lines = ["client scenarios the requirement sets run but do not score:"]
    for (era, name), (verdict, kind, detail) in sorted(scenarios.items()):
        if kind != "scored":
            lines.append(f"  {era} {verdict:4} {name} ({kind}: {detail})")
    return "\n".join(lines)


def _stale_entries(output: str) -> list[str]:
    """Entries of the known-failures file that matched no failing check of a scored scenario."""
    failing: set[str] = set()
    for label, _era, _status, scenario, check, _message in CHECK_LINE.findall(output):
        if label != "unscored":
            failing.update({scenario, f"{scenario}:{check}"})
    stale = []
    for line in KNOWN_FAILURES.read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry and entry not in failing:
            stale.append(entry)
    return stale
