#!/usr/bin/env python3
"""mcpsync's "everything client" for the client scenarios of the official MCP conformance suite.

    MCP_CONFORMANCE_SCENARIO=tools_call python integration/conformance/client.py http://localhost:PORT/mcp

The suite (``conformance client --command "python integration/conformance/client.py" ...``, run by
``scripts/conformance --client``) starts a mock server per scenario and then this program, with the
server's URL as the last argument and, in the environment, MCP_CONFORMANCE_SCENARIO (which scenario),
MCP_CONFORMANCE_PROTOCOL_VERSION (the wire it runs at: 2025-11-25 or 2026-07-28) and, for some,
MCP_CONFORMANCE_CONTEXT (JSON: pre-registered client credentials, the tool calls to make). The mock
server records what the client did and judges it; this program must exit 0 within 30 s unless the
scenario expects it to refuse (it then exits 1, and the suite judges what was, or was not, sent).

Strategy: one small function per scenario family, each doing what a script would do with mcpsync's
public API only (``mcpsync.connect(url, mode=..., auth=...)`` and ``mcpsync.auth``): the library does
the protocol work, so a failed check is the library's, never something patched here. The era comes from
MCP_CONFORMANCE_PROTOCOL_VERSION, as a real client would be configured: mode "modern" at 2026-07-28,
"legacy" before (the mock servers of the older scenarios answer any unknown method, so probing with
``server/discover`` would mislead them). The suite's fake authorization server redirects at once, so
the OAuth flow's browser is replaced by a redirect handler that GETs the authorization URL without
following the redirect, and a callback that hands the redirect's Location back to the flow.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import mcpsync

log = logging.getLogger("conformance-client")

MODERN = "2026-07-28"
TIMEOUT = 20.0  # the suite kills a client after 30 s; a call that hangs fails well before
CLIENT_INFO = {"name": "mcpsync-conformance-client", "version": mcpsync.__version__}
# The client ID metadata document URL the suite's CIMD scenarios expect a client to offer.
CIMD_URL = "https://conformance-test.local/client-metadata.json"

Scenario = Callable[[str, dict[str, Any], str], None]
SCENARIOS: dict[str, Scenario] = {}


def scenario(*names: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        for name in names:
            SCENARIOS[name] = fn
        return fn

    return register


def mode_for(version: str) -> str:
    return "modern" if version == MODERN else "legacy"


def connect(url: str, version: str, **kwargs: Any) -> mcpsync.ClientSession:
    return mcpsync.connect(url, mode=mode_for(version), timeout=TIMEOUT, client_info=CLIENT_INFO, **kwargs)


# -- callbacks a script would give ----------------------------------------------------------------

def accept_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """An elicitation answered by a user who accepts the form as the server pre-filled it: every
    field the schema gives a default gets that default (SEP-1034: the form shows the defaults)."""
    properties = (params.get("requestedSchema") or {}).get("properties") or {}
    content = {name: schema["default"] for name, schema in properties.items() if isinstance(schema, dict) and "default" in schema}
    return {"action": "accept", "content": content}


def no_roots(params: dict[str, Any]) -> dict[str, Any]:
    return {"roots": []}


def no_sampling(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "none", "stopReason": "endTurn"}


# -- the scenarios without authorization ----------------------------------------------------------

@scenario("initialize", "tools_call")
def list_and_call_first(url: str, context: dict[str, Any], version: str) -> None:
    with connect(url, version) as session:
        tools = session.list_tools()
        if tools:
            session.call_tool(tools[0]["name"], {"a": 2, "b": 3})


@scenario("json-schema-ref-no-deref")
def list_only(url: str, context: dict[str, Any], version: str) -> None:
    with connect(url, version) as session:
        session.list_tools()


@scenario("json-schema-2020-12-preservation")
def echo_schema(url: str, context: dict[str, Any], version: str) -> None:
    with connect(url, version) as session:
        tools = {tool["name"]: tool for tool in session.list_tools()}
        focal = tools["json_schema_2020_12_tool"]
        session.call_tool("json_schema_echo", {"schema": focal["inputSchema"]})


@scenario("elicitation-sep1034-client-defaults")
def elicitation_defaults(url: str, context: dict[str, Any], version: str) -> None:
    with connect(url, version, elicitation=accept_defaults) as session:
        names = [tool["name"] for tool in session.list_tools()]
        if "test_client_elicitation_defaults" not in names:
            raise SystemExit(f"the server lists no test_client_elicitation_defaults tool (it lists {names})")
        session.call_tool("test_client_elicitation_defaults", {})


@scenario("sse-retry")
def sse_retry(url: str, context: dict[str, Any], version: str) -> None:
    with connect(url, version) as session:
        session.list_tools()
        session.call_tool("test_reconnection", {})


@scenario("request-metadata")
def request_metadata(url: str, context: dict[str, Any], version: str) -> None:
    # Every capability a client may declare, so the scenario sees each well formed.
    with connect(url, version, roots=no_roots, sampling=no_sampling, elicitation=accept_defaults) as session:
        session.list_tools()


@scenario("sep-2322-client-request-state")
def request_state(url: str, context: dict[str, Any], version: str) -> None:
    holder: dict[str, mcpsync.ClientSession] = {}

    def confirm(params: dict[str, Any]) -> dict[str, Any]:
        # Between the rounds of one call, another call must go out clean (no state of the first).
        holder["session"].call_tool("test_mrtr_unrelated", {})
        return {"action": "accept", "content": {"confirmed": True}}

    with connect(url, version, elicitation=confirm) as session:
        holder["session"] = session
        session.list_tools()
        session.call_tool("test_mrtr_echo_state", {})
        session.call_tool("test_mrtr_no_state", {})
        session.call_tool("test_mrtr_no_result_type", {})


@scenario("http-standard-headers")
def every_kind_of_request(url: str, context: dict[str, Any], version: str) -> None:
    with connect(url, version) as session:
        for tool in session.list_tools():
            session.call_tool(tool["name"], {})
        for resource in session.list_resources():
            session.read_resource(resource["uri"])
        for prompt in session.list_prompts():
            session.get_prompt(prompt["name"], {})


@scenario("http-custom-headers")
def context_tool_calls(url: str, context: dict[str, Any], version: str) -> None:
    with connect(url, version) as session:
        session.list_tools()
        for call in context.get("toolCalls") or []:
            session.call_tool(call["name"], call.get("arguments") or {})


@scenario("http-invalid-tool-headers")
def invalid_tool_headers(url: str, context: dict[str, Any], version: str) -> None:
    with connect(url, version) as session:
        listed = session.list_tools()  # the library leaves out (and logs) each tool it must reject
        for tool in listed:
            session.call_tool(tool["name"], {"region": "us-west1"})
        # Every tool the server offers, asked for as a script that knows their names would: the
        # rejected ones must be refused by call_tool itself, before anything is sent.
        offered = [tool["name"] for tool in session.request("tools/list", {}).get("tools", [])]
        kept = {tool["name"] for tool in listed}
        for name in offered:
            if name in kept:
                continue
            try:
                session.call_tool(name, {"value": "x"})
            except mcpsync.McpsyncError as exc:
                log.info("call_tool(%r) refused locally: %s", name, exc)
            else:
                raise SystemExit(f"call_tool({name!r}) was sent although the tool was left out of list_tools()")


# -- the authorization scenarios -----------------------------------------------------------------

class Redirects:
    """The browser's part of the authorization code flow, for the suite's authorization server that
    redirects at once: GET the authorization URL, do not follow the redirect, keep its Location."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._location: str | None = None

    def open(self, authorization_url: str) -> None:
        parts = urlsplit(authorization_url)
        connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = connection_type(parts.hostname or "localhost", parts.port, timeout=TIMEOUT)
        try:
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            conn.request("GET", target or "/")
            response = conn.getresponse()
            response.read()
            location = response.getheader("Location")
        finally:
            conn.close()
        if not location:
            raise RuntimeError(f"the authorization endpoint answered HTTP {response.status} without a redirect")
        with self._lock:
            self._location = location

    def callback(self) -> str:
        with self._lock:
            location, self._location = self._location, None
        if location is None:
            raise RuntimeError("no redirect came back from the authorization endpoint")
        return location


def oauth(**kwargs: Any) -> Any:
    from mcpsync.auth.client.oauth import OAuth
    from mcpsync.auth.client.store import MemoryTokenStore

    redirects = Redirects()
    return OAuth(
        client_name="mcpsync-conformance-client",
        redirect_uri="http://localhost:3000/callback",
        redirect_handler=redirects.open,
        callback=redirects.callback,
        token_store=MemoryTokenStore(),
        login_timeout=TIMEOUT,
        timeout=TIMEOUT,
        **kwargs,
    )


def list_and_call_test_tool(url: str, version: str, auth: Any) -> None:
    with connect(url, version, auth=auth) as session:
        names = [tool["name"] for tool in session.list_tools()]
        if "test-tool" in names:
            session.call_tool("test-tool", {})


@scenario(
    "auth/basic-cimd",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
)
def authorization_code(url: str, context: dict[str, Any], version: str) -> None:
    list_and_call_test_tool(url, version, oauth(client_metadata_url=CIMD_URL))


@scenario("auth/pre-registration")
def pre_registered(url: str, context: dict[str, Any], version: str) -> None:
    auth = oauth(client_id=context["client_id"], client_secret=context.get("client_secret"))
    list_and_call_test_tool(url, version, auth)


@scenario("auth/client-credentials-basic")
def client_credentials_basic(url: str, context: dict[str, Any], version: str) -> None:
    from mcpsync.auth.client.client_credentials import ClientCredentials
    from mcpsync.auth.client.store import MemoryTokenStore

    auth = ClientCredentials(context["client_id"], client_secret=context["client_secret"], token_store=MemoryTokenStore(), timeout=TIMEOUT)
    list_and_call_test_tool(url, version, auth)


@scenario("auth/client-credentials-jwt")
def client_credentials_jwt(url: str, context: dict[str, Any], version: str) -> None:
    from mcpsync.auth.client.client_credentials import ClientCredentials
    from mcpsync.auth.client.store import MemoryTokenStore

    auth = ClientCredentials(
        context["client_id"],
        private_key=context["private_key_pem"],
        signing_algorithm=context.get("signing_algorithm") or "ES256",
        token_store=MemoryTokenStore(),
        timeout=TIMEOUT,
    )
    list_and_call_test_tool(url, version, auth)


# Extension scenarios for what mcpsync does not implement: the client says so and exits 1.
NOT_IMPLEMENTED = {
    "auth/dpop": "mcpsync's OAuth client has no DPoP-bound tokens (RFC 9449)",
    "auth/dpop-nonce": "mcpsync's OAuth client has no DPoP-bound tokens (RFC 9449)",
    "auth/enterprise-managed-authorization": "mcpsync has no token exchange for an identity assertion grant (SEP-990)",
    "auth/wif-jwt-bearer": "mcpsync has no JWT bearer grant for workload identities (RFC 7523 section 2.1)",
}


# -- running one -----------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if len(argv) < 2 or not name:
        print(f"usage: MCP_CONFORMANCE_SCENARIO=<scenario> {argv[0]} <server-url>", file=sys.stderr)
        print("scenarios: " + ", ".join(sorted(SCENARIOS)), file=sys.stderr)
        return 2
    if name in NOT_IMPLEMENTED:
        print(f"{name}: not implemented: {NOT_IMPLEMENTED[name]}", file=sys.stderr)
        return 1
    handler = SCENARIOS.get(name)
    if handler is None:
        print(f"unknown scenario {name!r}; this client knows: {', '.join(sorted(SCENARIOS))}", file=sys.stderr)
        return 2
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "2025-11-25"
    try:
        handler(argv[-1], context, version)
    except mcpsync.McpsyncError as exc:
        print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
