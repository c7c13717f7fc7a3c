"""`mcpsync serve --upstream URL` (and an upstream's `url` in --config) that cannot work: said at
once, in one line without the password, rather than retried for ever as a program to start or a
connection that is refused before it is made. Real `mcpsync serve` children."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .._timeouts import LONG
from ._serving import serve_env

CREDENTIALS = (
    "credentials in the URL are not supported (they are never sent); give the upstream a token in the headers (Authorization) "
    "or the auth table of its entry in a --config file"
)


def serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpsync", "serve", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=serve_env(), cwd=cwd, timeout=LONG
    )


@pytest.mark.parametrize(
    "upstream, told",
    [
        ("htp://host/mcp", "Error: --upstream 'htp://host/mcp' looks like a URL with an unknown scheme 'htp': only http:// and https:// URLs are supported"),
        ("ws://ada:s3cret@host/mcp", "Error: --upstream 'ws://host/mcp' looks like a URL with an unknown scheme 'ws': only http:// and https:// URLs are supported"),
        ("http://ada:s3cret@127.0.0.1:9/mcp", f"Error: --upstream http://127.0.0.1:9/mcp: {CREDENTIALS}"),
    ],
    ids=["misspelt-scheme", "other-scheme", "credentials"],
)
def test_an_upstream_url_that_cannot_work_exits_1_at_once(upstream: str, told: str, tmp_path: Path) -> None:
    result = serve("--upstream", upstream, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", told + "\n")


@pytest.mark.parametrize(
    "name, text, told",
    [
        ("gateway.toml", '[upstreams.files]\nurl = "https://ada:s3cret@mcp.example.com/mcp"\n', "gateway.toml:2: upstreams.files.url: "),
        ("claude.json", '{"mcpServers": {"files": {"url": "https://s3cret@mcp.example.com/mcp"}}}', "claude.json:1: files.url: "),
    ],
)
def test_credentials_in_a_configured_upstream_url_are_a_config_error(name: str, text: str, told: str, tmp_path: Path) -> None:
    (tmp_path / name).write_text(text)
    result = serve("--config", name, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"Error: {told}{CREDENTIALS}\n")


def test_an_upper_case_scheme_is_still_an_upstream_url() -> None:
    from mcpsync.cli.config import upstream_from_argument

    assert upstream_from_argument("HTTPS://mcp.example.com/mcp", 1).url == "https://mcp.example.com/mcp"
