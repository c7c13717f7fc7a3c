"""Icons where the protocol has them: checked when an entry is made (a `src` that is not `https:`,
`http:` or `data:` is the server author's mistake, said where it is made), sent to clients of
2025-11-25 and 2026-07-28, and left out for older handshake versions, with the other fields those
versions do not have (`title` before 2025-06-18; the server's `description` and `websiteUrl`)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpsync import Icon, Server, Service

from ..transport.pipes import PipeClient, modern

pytestmark = pytest.mark.timeout(60)

LOGO = Icon("https://example.com/logo.png", mime_type="image/png", sizes=("48x48",), theme="dark")


@pytest.mark.parametrize(("icons", "reason"), [
    ([{"src": "javascript:alert(1)"}], "https:, http: or data:"),
    ([{"src": "file:///etc/passwd"}], "https:, http: or data:"),
    ([Icon("")], "https:, http: or data:"),
    ([{"src": "https://x/i.png", "theme": "blue"}], "'light' or 'dark'"),
    ([{"src": "https://x/i.png", "sizes": "48x48"}], "list of strings"),
    ([{"src": "https://x/i.png", "onload": "x"}], "keys the wire does not"),
])
def test_a_bad_icon_is_refused_where_it_is_written(icons: list[Any], reason: str) -> None:
    service = Service("s")
    with pytest.raises(ValueError, match=reason):
        service.tool(icons=icons)(lambda: "x")
    with pytest.raises(ValueError, match=reason):
        Server("s", icons=icons)


def test_icons_as_a_string_or_a_website_that_is_no_url_are_refused() -> None:
    with pytest.raises(TypeError, match="not a string"):
        Service("s").prompt(icons="https://x/i.png")(lambda: "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="http"):
        Server("s", website_url="javascript:alert(1)")


def _server() -> Server:
    service = Service("iconic")

    @service.tool(icons=[LOGO], title="Echo")
    def echo(text: str) -> str:
        return text

    @service.prompt(icons=[LOGO], title="Review", meta={"k": "v"})
    def review() -> str:
        return "r"

    @service.resource("notes://{id}", icons=[LOGO], title="Note", meta={"k": "t"})
    def note(id: str) -> str:
        return id

    return Server("iconic", title="Iconic", description="faces", website_url="https://example.com", icons=[LOGO], services=[service])


@pytest.mark.parametrize(("version", "icons", "title"), [
    ("2025-11-25", True, True), ("2025-06-18", False, True), ("2025-03-26", False, False), ("2024-11-05", False, False),
])
def test_what_a_handshake_version_does_not_have_is_left_out(version: str, icons: bool, title: bool) -> None:
    with PipeClient(_server()) as client:
        info = client.initialize(version)["result"]["serverInfo"]
        assert ("icons" in info, "description" in info, "websiteUrl" in info) == (icons, icons, icons)
        assert ("title" in info) == title
        listed = [client.request(method, {})[0]["result"][key][0] for method, key in (
            ("tools/list", "tools"), ("prompts/list", "prompts"), ("resources/templates/list", "resourceTemplates"))]
        for entry in listed:
            assert ("icons" in entry, "title" in entry) == (icons, title), (version, entry)
        assert listed[1]["_meta"] == {"k": "v"} and listed[2]["_meta"] == {"k": "t"}  # _meta is every version's


def test_the_2026_era_has_them_all() -> None:
    with PipeClient(_server()) as client:
        discovered = client.request("server/discover", modern())[0]["result"]
        info = discovered["_meta"]["io.modelcontextprotocol/serverInfo"]
        assert info["icons"] == [LOGO.wire()] and info["websiteUrl"] == "https://example.com" and info["description"] == "faces"
        tools = client.request("tools/list", modern())[0]["result"]["tools"]
        assert tools[0]["icons"] == [{"src": "https://example.com/logo.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}]
