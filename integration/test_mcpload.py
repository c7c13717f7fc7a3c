"""scripts/mcpload, the benchmarks' load driver, run as a real process against real servers.

The benchmarks read its one-line JSON report and trust it, so this checks that the report is there
and sane (ok, counts, latencies positive and ordered) against the floor server and a real
`python -m mcpsync serve`, in both eras, at concurrency 1 and 4; the listen fan-out against
integration/dynamic_app.py (its add_tool changes the tool list); and that the exit statuses and the
stop of the server's whole process group hold.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from wire import HANDSHAKE_VERSION, MODERN_VERSION, REPO_ROOT, base_env, serve_argv

pytestmark = pytest.mark.timeout(60)

MCPLOAD = REPO_ROOT / "scripts" / "mcpload"
FLOOR = [sys.executable, str(REPO_ROOT / "scripts" / "peers" / "floor_server.py")]
DYNAMIC_APP = str(REPO_ROOT / "integration" / "dynamic_app.py")
RUN_LIMIT_S = 30        # mcpload's --timeout
PROCESS_LIMIT_S = 45    # the test's bound on the mcpload process itself
VERSIONS = {"legacy": HANDSHAKE_VERSION, "modern": MODERN_VERSION}
SERVERS = {"floor": FLOOR, "mcpsync": serve_argv()}


def mcpload(bounded, *options: str, server: list[str]) -> tuple[int, dict[str, Any] | None, str]:
    """Run mcpload; returns its exit status, its JSON report (None when it printed none) and stderr."""
    args = [sys.executable, str(MCPLOAD), "--timeout", str(RUN_LIMIT_S), *options, "--", *server]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    lines = done.stdout.splitlines()
    assert len(lines) <= 1, f"more than one line on stdout:\n{done.stdout}"
    return done.returncode, (json.loads(lines[0]) if lines else None), done.stderr


def assert_ordered_latencies(report: dict[str, Any], prefix: str = "") -> None:
    p50, p90, p99, top = (report[f"{prefix}{name}_us"] for name in ("p50", "p90", "p99", "max"))
    assert 0 < p50 <= p90 <= p99 <= top, report
    assert 0 < report[f"{prefix}mean_us"] <= top, report


def assert_common(report: dict[str, Any], era: str) -> None:
    assert report["ok"] is True and report["exit_code"] == 0, report
    assert "error" not in report, report
    assert report["era"] == era and report["protocol_version"] == VERSIONS[era], report
    assert report["startup_ms"] > 0, report
    assert report["server_peak_rss_kib"] > 1024, report
    assert report["server_requests_answered"] == 0, report
    assert report["shutdown"] == "exited", report


@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("name", list(SERVERS))
def test_load_report_is_complete_and_sane(bounded, name: str, era: str, concurrency: int) -> None:
    status, report, stderr = mcpload(bounded, "--era", era, "--requests", "60", "--warmup", "6",
                                     "--concurrency", str(concurrency), "--label", name, server=SERVERS[name])
    assert status == 0 and report is not None, stderr
    assert_common(report, era)
    assert report["label"] == name and report["mode"] == "load" and report["workload"] == "call"
    assert (report["requests"], report["warmup"], report["concurrency"]) == (60, 6, concurrency)
    assert report["errors"] == 0 and report["warmup_errors"] == 0, report
    assert_ordered_latencies(report)
    assert report["wall_s"] > 0 and report["throughput_rps"] > 0, report
    assert report["throughput_rps"] == pytest.approx(60 / report["wall_s"], rel=0.05)
    assert report["server_cpu_us_per_req"] >= 0 and report["driver_cpu_us_per_req"] > 0, report


def test_mixed_workload_reports_each_method(bounded) -> None:
    status, report, stderr = mcpload(bounded, "--workload", "mixed", "--requests", "50", server=FLOOR)
    assert status == 0 and report is not None, stderr
    assert 0 < report["tools_call_p50_us"] and 0 < report["tools_list_p50_us"], report


def test_big_payloads_in_flight_do_not_deadlock(bounded) -> None:
    """16 requests of 200 KB each are far more than a pipe holds, in both directions at once."""
    status, report, stderr = mcpload(bounded, "--payload-bytes", "200000", "--concurrency", "16",
                                     "--requests", "32", server=FLOOR)
    assert status == 0 and report is not None, stderr
    assert report["payload_bytes"] == 200000 and report["errors"] == 0, report


@pytest.mark.parametrize("listeners", [1, 4])
def test_listen_fanout_report(bounded, listeners: int) -> None:
    status, report, stderr = mcpload(bounded, "--listen-fanout", "--listeners", str(listeners),
                                     "--triggers", "5", "--warmup", "1", "--trigger-tool", "add_tool",
                                     server=serve_argv(DYNAMIC_APP))
    assert status == 0 and report is not None, stderr
    assert_common(report, "modern")
    assert report["mode"] == "listen-fanout" and (report["listeners"], report["triggers"]) == (listeners, 5)
    assert report["list_changed_received"] == listeners * 5, report
    assert report["duplicate_notifications"] == 0, report
    assert_ordered_latencies(report, "fanout_")
    assert 0 < report["trigger_response_p50_us"] <= report["trigger_response_p99_us"], report


def test_fanout_against_a_server_without_listen_is_a_protocol_error(bounded) -> None:
    status, report, _ = mcpload(bounded, "--listen-fanout", "--triggers", "1", server=FLOOR)
    assert status == 3 and report is not None and report["ok"] is False
    assert "subscriptions/listen" in report["error"]


def test_a_failing_probe_is_a_failed_request(bounded) -> None:
    status, report, _ = mcpload(bounded, "--tool", "no_such_tool", server=FLOOR)
    assert status == 1 and report is not None and report["ok"] is False
    assert "no_such_tool" in report["error"]


def test_output_that_is_not_json_rpc_is_a_protocol_error(bounded) -> None:
    status, report, _ = mcpload(bounded, server=[sys.executable, "-c", "print('hello')"])
    assert status == 3 and report is not None and "not JSON" in report["error"]


def test_usage_errors_exit_2(bounded) -> None:
    assert mcpload(bounded, "--requests", "0", server=FLOOR)[0] == 2
    done = bounded([sys.executable, str(MCPLOAD), "--requests", "5"], timeout=PROCESS_LIMIT_S)
    assert done.returncode == 2 and "--" in done.stderr


def test_timeout_stops_a_silent_server(bounded) -> None:
    silent = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    args = [sys.executable, str(MCPLOAD), "--timeout", "1", "--", *silent]
    started = time.monotonic()
    done = bounded(args, timeout=PROCESS_LIMIT_S)
    report = json.loads(done.stdout)
    assert done.returncode == 4 and "--timeout 1s expired" in report["error"], report
    assert time.monotonic() - started < 1 + 6  # the limit, the interpreter's start, the SIGKILL and reaping


def test_the_servers_whole_process_group_is_stopped(bounded, tmp_path: Path) -> None:
    """A wrapper's child (a gateway's upstream, say) must not outlive the run."""
    pid_file = tmp_path / "child.pid"
    wrapper = ["sh", "-c", f'sleep 600 & echo $! > "{pid_file}"; exec "$@"', "sh", *FLOOR]
    status, report, stderr = mcpload(bounded, "--requests", "10", server=wrapper)
    assert status == 0 and report is not None, stderr
    assert not running(int(pid_file.read_text()))


CHILD_OF_ITS_OWN = """
import os, sys, time
os.setsid()
ballast = bytearray(64 << 20)  # zero-filled, so resident: 64 MiB the report must count
with open(sys.argv[1], "w") as fifo:
    fifo.write(str(os.getpid()))
time.sleep(600)
"""


def test_a_child_in_a_session_of_its_own_is_measured_and_stopped(bounded, tmp_path: Path) -> None:
    """mcpsync starts its upstreams that way: their memory is the gateway's, and they must stop too."""
    fifo, pid_file = tmp_path / "ready", tmp_path / "child.pid"
    os.mkfifo(fifo)
    script = (f'"$0" -c "$1" "{fifo}" < /dev/null & read pid < "{fifo}"; echo "$pid" > "{pid_file}"; '
              f'exec "$0" "$2"')
    wrapper = ["sh", "-c", script, sys.executable, CHILD_OF_ITS_OWN, FLOOR[1]]
    status, report, stderr = mcpload(bounded, "--requests", "10", server=wrapper)
    assert status == 0 and report is not None, stderr
    assert report["server_peak_rss_kib"] > 64 * 1024, report
    assert not running(int(pid_file.read_text()))


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan stays a zombie until its new parent reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_help_names_every_option_the_benchmarks_pass(bounded) -> None:
    done = bounded([str(MCPLOAD), "--help"], timeout=PROCESS_LIMIT_S)
    assert done.returncode == 0, done.stderr
    for option in ("--era", "--workload", "--tool", "--args", "--payload-bytes", "--requests", "--concurrency",
                   "--warmup", "--timeout", "--stderr", "--pin-driver", "--pin-server", "--label", "--human",
                   "--listen-fanout", "--listeners", "--triggers", "--trigger-tool", "--trigger-args"):
        assert option in done.stdout, option
    for field in ("throughput_rps", "p50_us", "p99_us", "server_cpu_us_per_req", "server_peak_rss_kib",
                  "startup_ms", "fanout_p50_us", "fanout_p99_us", "trigger_response_p50_us", "Exit status"):
        assert field in done.stdout, field


def test_pinning_holds_from_the_servers_first_instruction(bounded, tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("pinning driver and server apart needs two CPUs")
    driver, server = cpus[0], cpus[1]
    seen = tmp_path / "server.cpus"
    report_cpus = ("import os, sys; open(sys.argv[1], 'w').write(str(sorted(os.sched_getaffinity(0)))); "
                   "os.execv(sys.executable, [sys.executable, sys.argv[2]])")
    server_argv = [sys.executable, "-c", report_cpus, str(seen), FLOOR[1]]
    status, report, stderr = mcpload(bounded, "--requests", "10", "--pin-driver", str(driver),
                                     "--pin-server", str(server), server=server_argv)
    assert status == 0 and report is not None, stderr
    assert (report["driver_cpus"], report["server_cpus"]) == ([driver], [server])
    assert seen.read_text() == str([server])
