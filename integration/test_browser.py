"""A web page calls mcpsync's HTTP endpoint from another origin, in a real browser (CORS).

Headless Chromium (Debian's `chromium`) driven by playwright-core loads a page served from one
loopback port (its origin, http://127.0.0.1:PAGE_PORT) whose script (integration/browser/page.js,
bundled with the TypeScript SDK's client by scripts/peers-browser) calls `mcpsync serve --http` on
another port. The browser only lets the page read the answers when mcpsync answers CORS for that
origin (every request the client makes is preflighted: it sends JSON and MCP headers), so what
counts is the browser's own verdict; the headers it saw (recorded by the driver) are checked too,
and quoted on a failure:

- with `--allow-origin http://127.0.0.1:PAGE_PORT` (or `*`), in both eras the client speaks (the
  2025-11-25 handshake, and 2026-07-28 negotiated with server/discover): connect, list the tools,
  call `echo`, read a resource. In 2025-11-25 the client must have read the exposed Mcp-Session-Id
  and ends the session with a DELETE; in 2026-07-28 it calls a tool with an `Mcp-Param-Region`
  header, then opens a listen and receives the tools list change that another client (this test,
  over plain HTTP) makes once the page says its listen is open;
- with an `--allow-origin` that is not the page's, or none, the page must fail, and the browser's
  console must say that CORS refused it.

The page tells the test its listen is open by fetching /listening from its own server (same origin,
no CORS); that request's handler makes the change and only then answers, so nothing sleeps.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote, urlsplit

import pytest
from wire import FIXTURES, HANDSHAKE_VERSION, MODERN_VERSION, REPO_ROOT, modern_meta, read_serving_url, spawn_http_server

pytestmark = pytest.mark.timeout(120)

LONG = 20.0 if os.environ.get("CI") else 10.0
APP = FIXTURES / "http_app.py"
DRIVER = Path(__file__).parent / "browser" / "driver.mjs"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"  # as scripts/peers-browser
PAGE_TIMEOUT_MS = 30_000  # the driver's wait for the page's verdict
DRIVER_TIMEOUT = 60.0  # the whole driver run, browser start and shutdown included
PEERS_BROWSER_TIMEOUT = 100.0  # below the pytest timeout; its npm steps are bounded below that
NPM_INSTALL_TIMEOUT = 90
WELCOME = "Hello from mcpsync."


# -- the pieces: the peers, the server, the page's server, the browser -----------------------------

@pytest.fixture(scope="module")
def peers_browser(bounded: Callable[..., Any]) -> Path:
    """The folder scripts/peers-browser fills (playwright-core, the bundled page), built if needed."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no Chromium at {CHROMIUM}; install it (Debian: apt-get install chromium)", pytrace=False)
    if shutil.which("node") is None:
        pytest.fail("node is not on the PATH (Debian: apt-get install nodejs npm)", pytrace=False)
    env = {**os.environ, "PEERS_BROWSER_TIMEOUT": str(NPM_INSTALL_TIMEOUT)}
    result = bounded([str(REPO_ROOT / "scripts" / "peers-browser")], timeout=PEERS_BROWSER_TIMEOUT, cwd=REPO_ROOT, env=env)
    if result.returncode != 0:
        pytest.fail(f"scripts/peers-browser failed with exit status {result.returncode}\n{result.stderr}", pytrace=False)
    lines = result.stdout.strip().splitlines()
    folder = Path(lines[-1]) if lines else None
    if folder is None or not (folder / "page" / "page.js").is_file():
        pytest.fail(f"scripts/peers-browser printed no usable folder: {result.stdout!r}\n{result.stderr}", pytrace=False)
    return folder


class McpServer:
    """`mcpsync serve --http 127.0.0.1:0 APP ARGS...` (http_app.py unless given); `.url` once it listens."""

    def __init__(self, *args: str, app: Path = APP) -> None:
        self.proc = spawn_http_server(str(app), *args)
        url, self.stderr = read_serving_url(self.proc, LONG)
        if url is None:
            self.stop()
            pytest.fail(f"the server did not start:\n{self.stderr.decode(errors='replace')}", pytrace=False)
        self.url = url

    def stop(self) -> str:
        """Kill its process group; all it wrote on stderr."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            _, rest = self.proc.communicate(timeout=LONG)
        except subprocess.TimeoutExpired:
            rest = b""
        return (self.stderr + (rest or b"")).decode(errors="replace")


@pytest.fixture
def mcp_server() -> Iterator[Callable[..., McpServer]]:
    started: list[McpServer] = []

    def start(*args: str, app: Path = APP) -> McpServer:
        server = McpServer(*args, app=app)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


class PageServer:
    """Serves the bundled page from 127.0.0.1 on a port of its own (that port makes the page's
    origin), on a thread. GET /listening runs `on_listening` before it answers (the page's cue)."""

    def __init__(self, folder: Path) -> None:
        self.on_listening: Callable[[], Any] | None = None
        self.listening_results: list[Any] = []
        self.listening_errors: list[str] = []
        owner = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(folder), **kwargs)

            def do_GET(self) -> None:
                if self.path != "/listening":
                    super().do_GET()
                    return
                try:
                    if owner.on_listening is None:
                        raise AssertionError("the page said it listens, but this test expects no listen")
                    owner.listening_results.append(owner.on_listening())
                    status = 204
                except Exception as exc:  # reported by the test, not lost in this thread
                    owner.listening_errors.append(f"{type(exc).__name__}: {exc}")
                    status = 500
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="page-server", daemon=True)
        self.thread.start()

    def page_url(self, server_url: str, era: str) -> str:
        return f"{self.origin}/index.html?server={quote(server_url, safe='')}&era={era}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(LONG)


@pytest.fixture
def page_server(peers_browser: Path) -> Iterator[PageServer]:
    server = PageServer(peers_browser / "page")
    yield server
    server.close()


def open_page(bounded: Callable[..., Any], peers_browser: Path, url: str) -> dict[str, Any]:
    """Run the driver on `url`: what the page reported, with the browser's console and network."""
    done = bounded([str(peers_browser / "node"), str(DRIVER), str(peers_browser), CHROMIUM, url, str(PAGE_TIMEOUT_MS)],
                   timeout=DRIVER_TIMEOUT, cwd=REPO_ROOT)
    lines = done.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        pytest.fail(f"the driver printed no JSON line (exit {done.returncode}):\n{done.stdout}\n{done.stderr}", pytrace=False)
    if done.returncode != 0 or out.get("results") is None:
        pytest.fail(f"the page reported nothing (driver exit {done.returncode}):\n{json.dumps(out, indent=2)}\n{done.stderr}",
                    pytrace=False)
    return out


def add_tool_over_http(url: str) -> str:
    """Another client: one 2026-07-28 `tools/call add_tool` POST with http.client; the new tool's name."""
    body = {"jsonrpc": "2.0", "id": "other-1", "method": "tools/call",
            "params": {"name": "add_tool", "arguments": {}, "_meta": modern_meta()}}
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    try:
        conn.request("POST", parts.path, body=json.dumps(body), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "add_tool"})
        response = conn.getresponse()
        raw = response.read().decode()
    finally:
        conn.close()
    assert response.status == 200, f"add_tool: HTTP {response.status}: {raw}"
    if response.getheader("Content-Type", "").startswith("text/event-stream"):
        frames = [json.loads(line[5:]) for line in raw.splitlines() if line.startswith("data:")]
        answer = next(frame for frame in frames if frame.get("id") == "other-1")
    else:
        answer = json.loads(raw)
    assert "result" in answer, f"add_tool: {answer}"
    return answer["result"]["content"][0]["text"]


def explain(out: dict[str, Any], server: McpServer | None = None) -> str:
    text = json.dumps(out, indent=2)
    return text + ("" if server is None else "\n--- server stderr ---\n" + server.stderr.decode(errors="replace"))


# -- an allowed origin: the page works, in both eras ------------------------------------------------

@pytest.mark.parametrize("allowed", ["the page's origin", "*"])
@pytest.mark.parametrize("era", [HANDSHAKE_VERSION, MODERN_VERSION])
def test_a_page_from_an_allowed_origin_calls_the_server(era, allowed, bounded, peers_browser, page_server, mcp_server) -> None:
    allow_origin = "*" if allowed == "*" else page_server.origin
    server = mcp_server("--allow-origin", allow_origin)
    if era == MODERN_VERSION:
        page_server.on_listening = lambda: add_tool_over_http(server.url)
    out = open_page(bounded, peers_browser, page_server.page_url(server.url, era))
    results = out["results"]
    assert results["ok"] is True, explain(out, server)
    assert results["protocolVersion"] == era, explain(out)
    assert {"echo", "add_tool"} <= set(results["tools"]), explain(out)
    assert results["echo"] == "hello from a web page"
    assert results["resource"] == WELCOME
    assert not page_server.listening_errors, page_server.listening_errors
    answers = [r for r in out["responses"] if r["url"].startswith(server.url) and r["method"] != "OPTIONS"]
    if era == MODERN_VERSION:
        assert results["weather"] == "sunny in north", explain(out)
        mirrored = [r for r in answers if r["requestHeaders"].get("mcp-name") == "region_weather"]
        assert mirrored and mirrored[0]["requestHeaders"].get("mcp-param-region") == "north", explain(out)
        assert page_server.listening_results == ["dyn_1"], explain(out)
        assert results["honored"].get("toolsListChanged") is True, explain(out)
        assert "dyn_1" in results["toolsAfterChange"] and "dyn_1" not in results["tools"], explain(out)
    else:
        assert page_server.listening_results == [], explain(out)
        # The client read Mcp-Session-Id (a page sees only exposed headers) and sends it back.
        session = answers[0]["headers"].get("mcp-session-id")
        assert session and all(r["requestHeaders"].get("mcp-session-id") == session for r in answers[1:]), explain(out)
        # ... and ends it with a DELETE, which the preflight allowed.
        assert [r["status"] for r in answers if r["method"] == "DELETE"] in ([200], [204]), explain(out)
    # What the browser showed the page: the answers came with the origin's CORS headers.
    assert answers, explain(out)
    for answer in answers:
        assert answer["headers"].get("access-control-allow-origin") == allow_origin, explain(out)
        assert "access-control-allow-credentials" not in answer["headers"], explain(out)
    assert not [line for line in out["console"] if "CORS" in line], explain(out)


# -- an origin not allowed: the browser refuses, and says it is CORS ---------------------------------

@pytest.mark.parametrize("allowed", ["another origin", "none"])
@pytest.mark.parametrize("era", [HANDSHAKE_VERSION, MODERN_VERSION])
def test_a_page_from_an_origin_not_allowed_fails_on_cors(era, allowed, bounded, peers_browser, page_server, mcp_server) -> None:
    args = ("--allow-origin", "http://127.0.0.1:1") if allowed == "another origin" else ()
    server = mcp_server(*args)
    out = open_page(bounded, peers_browser, page_server.page_url(server.url, era))
    results = out["results"]
    assert results["ok"] is False, explain(out, server)
    assert "fetch" in f"{results.get('error')} {results.get('cause')}".lower(), explain(out)  # TypeError: Failed to fetch
    refusals = [line for line in out["console"] if "blocked by CORS policy" in line and server.url in line]
    assert refusals, explain(out)
    assert page_server.listening_results == [] and page_server.listening_errors == []


# -- an MCP App's page, rendered ------------------------------------------------------------------

def test_an_apps_page_renders_in_chromium_with_the_tools_result(bounded, peers_browser, mcp_server, tmp_path) -> None:
    """MCP Apps: a host page (integration/browser/apps_host.html, a stand-in for Claude's or VS Code's)
    reads the ui:// page the tool names through the protocol, renders it in a sandboxed frame under
    the CSP the page declared, and hands it the tool's result; the page, run by Chromium, shows it."""
    folder = tmp_path / "host"
    folder.mkdir()
    shutil.copy(Path(__file__).parent / "browser" / "apps_host.html", folder / "apps_host.html")
    host = PageServer(folder)
    try:
        server = mcp_server("--allow-origin", host.origin, app=FIXTURES / "apps_app.py")
        out = open_page(bounded, peers_browser, f"{host.origin}/apps_host.html?server={quote(server.url, safe='')}")
    finally:
        host.close()
    results = out["results"]
    assert results.get("rendered") == "Lisbon: sunny", explain(out, server)
    assert results["mimeType"] == "text/html;profile=mcp-app" and "connect-src https://api.example.com" in results["policy"]
    assert "Lisbon" in results["text"]  # the text a host without the extension would show
    assert not out["pageErrors"], explain(out, server)
