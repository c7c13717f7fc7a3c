"""RFC 6570 templates against the official Python SDK (mcp, in the peers venv), which has its own
matcher (`mcp.shared.uri_template`): on a corpus of templates and URIs the two find the same
values, save where mcpsync chose otherwise, each choice named below; and the SDK's client reads
through mcpsync's level-3 and level-4 templates in both eras, a path attack refused -32602."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpsync.protocol.uri_template import UriTemplate

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_catalog_driver.py")
APP = Path(__file__).parent / "fixtures" / "templates_app.py"

AGREED = [
    ("notes://{id}", "notes://42"), ("notes://{id}", "notes://a/b"), ("notes://{id}", "notes://hello%20world"),
    ("notes://{id}", "notes://a%2Fb"), ("file:///{+path}", "file:///a/b/c.txt"), ("file:///{+path}{?rev}", "file:///a/b.txt?rev=3"),
    ("file:///{+path}{?rev}", "file:///a/b.txt"), ("search{?q,lang}", "search?lang=en&q=hello%20world"), ("search{?q,lang}", "search?q=x"),
    ("search{?q,lang}", "search"), ("search{?q,lang}", "search?other=1&q=x"), ("/files{/path*}", "/files/a/b/c"),
    ("/x/{name}{.ext}", "/x/report.json"), ("{a}-{b}", "x-y-z"), ("/p{;x,y}/z", "/p;x=1;y=2/z"), ("doc{#section}", "doc#intro"),
    ("repo://{owner}/{repo}/blob/{+path}", "repo://me/proj/blob/src/a.py"), ("db://{table}/{id}{?fields}", "db://users/7?fields=name,email"),
    ("weather://{city}/current", "weather://S%C3%A3o%20Paulo/current"), ("weather://{city}/current", "weather://x/y/current"),
    ("{/a,b}/c", "/x/y/c"), ("x{.a,b}", "x.1.2"), ("git://diff/{+range}", "git://diff/main..dev"), ("{+path}{.ext}", "a/b/file.tar.gz"),
    ("/items/{id}", "/items/%2F"), ("api{/version}/items{?limit}", "api/v2/items?limit=5"),
]
CHOSEN = {
    # (template, uri): (mcpsync's answer, the SDK's), and why mcpsync's
    ("notes://{id}", "notes://"): (None, {"id": ""}),  # a simple variable is never empty: no empty segment is served
    ("repo://{owner}/{repo}/blob/{+path}", "repo://me/proj/blob/"): (None, {"owner": "me", "repo": "proj", "path": ""}),  # nor a path
    ("/x/{name}{.ext}", "/x/report"): ({"name": "report"}, None),  # `{.ext}` undefined expands to nothing, so this is its URI
    ("/files{/path*}", "/files"): ({}, {"path": []}),  # an empty list is undefined (RFC 6570 2.3): absent
    ("tags{?tag*}", "tags?tag=a&tag=b"): ({"tag": ["a", "b"]}, "refused"),  # an exploded query variable, which the SDK cannot match
}


def test_mcpsync_and_the_official_sdk_find_the_same_values(peers_python: str, bounded: Any, tmp_path: Path) -> None:
    pairs = AGREED + list(CHOSEN)
    given = tmp_path / "pairs.json"
    given.write_text(json.dumps(pairs))
    done = bounded([peers_python, str(DRIVER), "match", str(given)], timeout=60)
    assert done.returncode == 0, done.stderr
    sdk = json.loads(done.stdout)
    for (template, uri), theirs in zip(pairs, sdk, strict=True):
        ours = UriTemplate(template).match(uri)
        if (template, uri) in CHOSEN:
            expected_ours, expected_theirs = CHOSEN[template, uri]
            assert ours == expected_ours, (template, uri)
            assert theirs == expected_theirs or (expected_theirs == "refused" and "refused" in theirs), (template, uri, theirs)
        else:
            assert ours == theirs, (template, uri)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_official_sdk_client_reads_through_level_3_and_4_templates(peers_python: str, bounded: Any, tmp_path: Path, mode: str) -> None:
    uris = [
        "notes://search?lang=pt&q=ol%C3%A1",
        "notes://search?q=x",
        "tree://root/a/b%20c/d",
        "files://docs/guide.md",
        "files://..%2F..%2Fetc%2Fpasswd",
    ]
    listed = tmp_path / "uris.json"
    listed.write_text(json.dumps(uris))
    done = bounded([peers_python, str(DRIVER), "read", mode, str(listed), "--", sys.executable, "-m", "mcpsync", "serve", str(APP)], timeout=90)
    assert done.returncode == 0, done.stderr
    read = {entry["uri"]: entry for entry in json.loads(done.stdout)}
    assert read[uris[0]]["text"] == "search 'olá' in pt"
    assert read[uris[1]]["text"] == "search 'x' in en"
    assert read[uris[2]]["text"] == "a > b c > d"
    assert read[uris[3]]["text"] == "file docs/guide.md"
    if mode == "auto":  # 2026-07-28's cache hints (the SDK's models fill in its defaults in the handshake era)
        assert (read[uris[3]]["ttlMs"], read[uris[3]]["cacheScope"]) == (30_000, "public")  # the resource's own
        assert (read[uris[0]]["ttlMs"], read[uris[0]]["cacheScope"]) == (0, "private")  # the server's
    code, message = read[uris[4]]["error"]
    assert code == -32602 and "is a path it may not be" in message
