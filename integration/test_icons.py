"""Icons, a website and a description of the server, `_meta` on prompts, resources and templates, and
the server's extensions (issue 29's protocol gaps and SEP-2133), as the official Python SDK's client
parses them in both eras: its models keep a field only when it validates, so what it dumps back is
what it understood."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_catalog_driver.py")
APP = Path(__file__).parent / "fixtures" / "icons_app.py"
LOGO = {"src": "https://example.com/logo.png", "mimeType": "image/png", "sizes": ["48x48", "96x96"], "theme": "light"}
DOT = {"src": "data:image/svg+xml;base64,PHN2Zy8+", "mimeType": "image/svg+xml", "sizes": ["any"]}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_official_sdk_client_sees_every_icon_and_meta(peers_python: str, bounded: Any, mode: str) -> None:
    done = bounded([peers_python, str(DRIVER), "list", mode, "--", sys.executable, "-m", "mcpsync", "serve", str(APP)], timeout=90)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    info = seen["serverInfo"]
    assert (info["title"], info["description"], info["websiteUrl"], info["icons"]) == ("Iconic", "A server with faces", "https://example.com/iconic", [LOGO, DOT])
    [tool] = seen["tools"]
    assert tool["icons"] == [LOGO] and tool["title"] == "Echo"
    [prompt] = seen["prompts"]
    assert prompt["icons"] == [DOT] and prompt["_meta"] == {"example.com/category": "writing"}
    [resource] = seen["resources"]
    assert resource["icons"] == [DOT] and resource["_meta"] == {"example.com/owner": "docs"}
    [template] = seen["templates"]
    assert template["icons"] == [LOGO] and template["_meta"] == {"example.com/kind": "note"}
    offered = seen["capabilities"]["extensions"]  # SEP-2133: what the SDK reads of mcpsync's extensions (tasks' too, in 2026-07-28)
    assert offered["io.modelcontextprotocol/ui"] == {"mimeTypes": ["text/html;profile=mcp-app"]} and offered["com.example/notes"] == {"version": 2}
