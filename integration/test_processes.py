"""`mcpsync serve --http ADDR --processes N`: N gunicorn workers, real processes on real sockets,
one Redis (Debian's redis-server, started by the test) making them one server; and the load
balancer of the multi-replica tests (integration/fixtures/nginx.py, Debian's nginx) in front of two.

Which worker answered is seen through the fixture target's `pid` tool (integration/fixtures/
pid_app.py), never a debug endpoint. A TCP connection stays with the worker that accepted it, so a
request sent on a kept-alive connection after a `pid` call runs in the process that call named:
that is how a test opens a listen on one worker and makes a change through another. Which worker
accepts a new connection is the kernel's choice, so finding a second worker is a loop bounded in
attempts and time, never a sleep.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from fixtures.nginx import Nginx
from wire import base_env, children_of, has_traceback, modern_meta, read_serving_url, spawn_http_server, stat_fields

import mcpsync
from mcpsync.processes import GRACEFUL_TIMEOUT
from tests._timeouts import LONG
from tests.bus.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

PID_APP = Path(__file__).parent / "fixtures" / "pid_app.py"
MODERN = "2026-07-28"
ATTEMPTS = 200  # fresh connections tried to reach a worker other than a given one


class Workers:
    """`mcpsync serve --http 127.0.0.1:0 --processes N ARGS...`; `.url` once the master has bound
    the port, `.stop()` sends SIGTERM and returns (exit status, seconds it took, stderr)."""

    def __init__(self, processes: int, *args: str) -> None:
        self.proc = spawn_http_server("--processes", str(processes), *args)
        url, self.stderr = read_serving_url(self.proc, LONG)
        if url is None:
            self.kill()
            pytest.fail(f"the server did not start:\n{self.stderr.decode(errors='replace')}", pytrace=False)
        self.url = url
        self.port = int(urlsplit(url).port or 0)
        # --processes 1 is today's server, in this one process: no workers to wait for
        self.pids = self._read_worker_pids(processes) if processes > 1 else [self.proc.pid]

    def _read_worker_pids(self, count: int) -> list[int]:
        """Read stderr until `count` workers said they serve (the master binds the port before
        they have built their servers), within LONG; their pids."""
        assert self.proc.stderr is not None
        deadline = time.monotonic() + LONG
        while len(found := re.findall(rb"mcpsync: worker process (\d+) is serving\n", self.stderr)) < count:
            ready, _, _ = select.select([self.proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.proc.stderr.fileno(), 4096) if ready else b""
            if not chunk:
                self.kill()
                pytest.fail(f"{count} workers did not start:\n{self.stderr.decode(errors='replace')}", pytrace=False)
            self.stderr += chunk
        return [int(pid) for pid in found]

    def stop(self) -> tuple[int, float, str]:
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, rest = self.proc.communicate(timeout=GRACEFUL_TIMEOUT + LONG)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("the master did not exit after SIGTERM", pytrace=False)
        return self.proc.returncode, time.monotonic() - began, (self.stderr + rest).decode(errors="replace")

    def kill(self) -> None:
        """The whole group (master and workers) at once: for a test that failed half-way."""
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.communicate(timeout=LONG)


class Connection:
    """One kept-alive HTTP connection, so one worker: 2026-07-28 requests sent on it in turn."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self.http = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)

    def post(self, method: str, params: dict[str, Any], request_id: Any) -> http.client.HTTPResponse:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if "name" in params:
            headers["Mcp-Name"] = params["name"]
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": modern_meta(), **params}}
        self.http.request("POST", self.path, body=json.dumps(body).encode(), headers=headers)
        return self.http.getresponse()

    def call(self, tool: str) -> str:
        response = self.post("tools/call", {"name": tool, "arguments": {}}, 1)
        answer = json.loads(response.read())
        assert response.status == 200, answer
        text: str = answer["result"]["content"][0]["text"]
        return text

    def listen(self, request_id: str) -> Iterator[dict[str, Any]]:
        """Open a listen for tool list changes on this connection; its messages once acknowledged."""
        response = self.post("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id)
        assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
        messages = _sse_messages(response)
        assert next(messages)["method"] == "notifications/subscriptions/acknowledged"
        return messages

    def close(self) -> None:
        self.http.close()


def _sse_messages(response: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    while True:
        line = response.readline()
        if not line:
            return
        if line.startswith(b"data: "):
            yield json.loads(line[6:])


def on_another_worker(url: str, than: set[str]) -> tuple[Connection, str]:
    """A connection to a worker whose pid is not in `than`, and that pid (fresh connections until
    the kernel hands one to another worker, at most ATTEMPTS of them within LONG)."""
    deadline = time.monotonic() + LONG
    for _ in range(ATTEMPTS):
        connection = Connection(url)
        pid = connection.call("pid")
        if pid not in than:
            return connection, pid
        connection.close()
        if time.monotonic() > deadline:
            break
    pytest.fail(f"every connection reached the worker(s) {sorted(than)}")


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with RedisServer() as running:
        yield running


@pytest.fixture
def workers(redis: RedisServer) -> Iterator[Workers]:
    running = Workers(2, "--bus", redis.url, str(PID_APP))
    try:
        yield running
    finally:
        running.kill()


def test_the_demo_is_served_by_worker_processes_that_stop_cleanly(redis: RedisServer) -> None:
    served = Workers(2, "--bus", redis.url)
    try:
        with mcpsync.connect(served.url, mode="modern", timeout=LONG) as session:
            assert session.call_tool("add", {"a": 2, "b": 3})["content"][0]["text"] == "5"
            assert "echo" in {tool["name"] for tool in session.list_tools()}
        status, _, stderr = served.stop()
    finally:
        served.kill()
    assert status == 0, stderr
    assert "without a shared bus" not in stderr  # redis:// makes them one server: no warning
    assert not has_traceback(stderr), stderr


def test_two_worker_processes_of_one_master_serve_requests(workers: Workers) -> None:
    first, first_pid = on_another_worker(workers.url, set())
    second, second_pid = on_another_worker(workers.url, {first_pid})
    assert first_pid != second_pid
    assert {int(first_pid), int(second_pid)} == set(workers.pids) <= set(children_of(workers.proc.pid))  # the master's own workers
    assert first.call("pid") == first_pid and second.call("pid") == second_pid  # a connection stays with its worker
    first.close()
    second.close()


def test_a_listen_on_one_worker_hears_a_change_made_through_another(workers: Workers) -> None:
    holder, holder_pid = on_another_worker(workers.url, set())
    messages = holder.listen("L1")
    changer, changer_pid = on_another_worker(workers.url, {holder_pid})
    assert changer.call("change") == changer_pid  # made in the other process...
    assert next(messages) == {  # ...heard in this one, through Redis
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "L1"}},
    }
    changer.close()
    holder.close()


def test_sigterm_to_the_master_completes_every_open_listen_and_the_tree_exits(workers: Workers) -> None:
    """Each worker's SIGTERM hook starts the server's shutdown at once: without it gunicorn would
    wait its whole graceful_timeout for the open streams, then cut them without a result."""
    first, first_pid = on_another_worker(workers.url, set())
    second, second_pid = on_another_worker(workers.url, {first_pid})
    listens = {"A": first.listen("A"), "B": second.listen("B")}
    status, took, stderr = workers.stop()
    for request_id, messages in listens.items():
        final = next(messages)
        assert final["id"] == request_id and final["result"]["resultType"] == "complete", final
        assert list(messages) == []  # then the stream ends
    assert status == 0, stderr
    assert took < GRACEFUL_TIMEOUT / 2, f"the stop took {took:.1f} s: the streams held it\n{stderr}"
    assert stat_fields(int(first_pid)) is None and stat_fields(int(second_pid)) is None  # reaped, not left behind
    assert not has_traceback(stderr), stderr
    first.close()
    second.close()


def test_ctrl_c_completes_every_open_listen_too(workers: Workers) -> None:
    """A terminal's Ctrl-C: SIGINT to the whole group, so each worker gets it directly and then
    SIGQUIT from its master, a quick stop; the `worker_int` hook still ends each listen properly."""
    first, first_pid = on_another_worker(workers.url, set())
    second, second_pid = on_another_worker(workers.url, {first_pid})
    listens = {"A": first.listen("A"), "B": second.listen("B")}
    began = time.monotonic()
    os.killpg(workers.proc.pid, signal.SIGINT)
    for request_id, messages in listens.items():
        final = next(messages)
        assert final["id"] == request_id and final["result"]["resultType"] == "complete", final
    _, rest = workers.proc.communicate(timeout=GRACEFUL_TIMEOUT + LONG)
    stderr = (workers.stderr + rest).decode(errors="replace")
    assert workers.proc.returncode == 0, stderr
    assert time.monotonic() - began < GRACEFUL_TIMEOUT / 2, stderr
    assert not has_traceback(stderr), stderr
    first.close()
    second.close()


def test_without_a_shared_bus_the_workers_warn_that_they_are_not_one_server() -> None:
    served = Workers(2, str(PID_APP))
    try:
        status, _, stderr = served.stop()
    finally:
        served.kill()
    assert status == 0, stderr
    assert "--processes 2 without a shared bus (--bus redis://...): each worker has its own sessions and listens" in served.stderr.decode()


@pytest.mark.parametrize("upstream_keepalive", [0, 8], ids=["new-upstream-connections", "kept-alive"])
def test_nginx_balances_round_robin_with_no_affinity_and_streams_unbuffered(redis: RedisServer, upstream_keepalive: int) -> None:
    """The fixture the multi-replica tests stand on: every request goes to the next replica, even
    on one client connection, and a listen's events pass through as they are written."""
    replicas = [Workers(1, "--bus", redis.url, str(PID_APP)) for _ in range(2)]
    try:
        with Nginx(upstreams=[("127.0.0.1", replica.port) for replica in replicas], upstream_keepalive=upstream_keepalive) as balancer:
            client = Connection(balancer.mcp_url)
            pids = [int(client.call("pid")) for _ in range(6)]
            first, second = pids[:2]
            assert {first, second} == {replica.proc.pid for replica in replicas}, balancer.access_log()
            assert pids == [first, second] * 3, balancer.access_log()
            messages = Connection(balancer.mcp_url).listen("L")  # the next request: on `first`
            assert int(client.call("change")) == second  # and the one after: on the other replica
            assert next(messages) == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "L"}},
            }
            client.close()
        for replica in replicas:
            status, _, stderr = replica.stop()
            assert status == 0 and not has_traceback(stderr), stderr
    finally:
        for replica in replicas:
            replica.kill()


def test_two_instances_of_two_workers_behind_nginx_are_one_server(redis: RedisServer) -> None:
    """The multi-replica deployment of issue 16 in small: `--processes 2` twice on one Redis (no
    clash between the two masters), behind the balancer; all four workers answer, and a listen
    held by one instance hears a change made through the balancer on the other."""
    instances = [Workers(2, "--bus", redis.url, str(PID_APP)) for _ in range(2)]
    try:
        every = {pid for instance in instances for pid in instance.pids}
        with Nginx(upstreams=[("127.0.0.1", instance.port) for instance in instances]) as balancer:
            client = Connection(balancer.mcp_url)
            seen: set[int] = set()
            deadline = time.monotonic() + LONG
            for _ in range(ATTEMPTS):
                seen.add(int(client.call("pid")))
                if seen == every or time.monotonic() > deadline:
                    break
            assert seen == every, balancer.access_log()
            messages = Connection(balancer.mcp_url).listen("L")  # on one instance...
            client.call("change")  # ...and this, the next request, on the other
            assert next(messages)["method"] == "notifications/tools/list_changed"
            client.close()
        for instance in instances:
            status, _, stderr = instance.stop()
            assert status == 0 and not has_traceback(stderr), stderr
    finally:
        for instance in instances:
            instance.kill()


def test_the_example_gunicorn_conf_ends_open_listens_at_once_on_sigterm(redis: RedisServer, tmp_path: Path) -> None:
    """docs/examples/gunicorn.conf.py, as a deployment runs it (gunicorn's own command, the hooks
    imported from mcpsync.gunicorn, scaled.py's server on Redis through MCPSYNC_BUS): a graceful
    stop completes the open listen and is over long before gunicorn's graceful_timeout."""
    examples = Path(__file__).resolve().parent.parent / "docs" / "examples"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(examples / "gunicorn.conf.py"), "--chdir", str(examples),
         "--bind", "127.0.0.1:0", "--workers", "2"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        # gunicorn 24+ opens a control socket in $XDG_RUNTIME_DIR (else ~/.gunicorn): this run's own
        env=base_env(MCPSYNC_BUS=redis.url, XDG_RUNTIME_DIR=str(tmp_path)), start_new_session=True,
    )
    assert proc.stderr is not None
    log = b""
    try:
        deadline = time.monotonic() + LONG
        while b"Listening at: " not in log or b"\n" not in log.split(b"Listening at: ", 1)[1]:
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(proc.stderr.fileno(), 4096) if ready else b""
            assert chunk, f"gunicorn did not start:\n{log.decode(errors='replace')}"
            log += chunk
        url = log.split(b"Listening at: ", 1)[1].split()[0].decode() + "/mcp"
        client = Connection(url)
        assert client.call("worker").startswith("worker ")
        messages = client.listen("L")
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        final = next(messages)
        assert final["id"] == "L" and final["result"]["resultType"] == "complete", final
        _, rest = proc.communicate(timeout=GRACEFUL_TIMEOUT + LONG)
        log += rest
        text = log.decode(errors="replace")
        assert proc.returncode == 0, text
        assert time.monotonic() - began < GRACEFUL_TIMEOUT / 2, text
        assert not has_traceback(text), text
        client.close()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=LONG)
