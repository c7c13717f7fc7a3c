"""What `mcpsync serve --http` logs when its DNS-rebinding check refuses a request: the option of
the command line that lets it in, beside the Python setting, on a real child over a real socket."""

from __future__ import annotations

import http.client
import urllib.parse

import pytest

from .._timeouts import LONG
from ._http_child import HttpChild


def post(url: str, headers: dict[str, str]) -> int:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    try:
        connection.request("POST", parts.path, body=b"{}", headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.parametrize(
    "headers, told",
    [
        ({"Host": "attacker.example"}, "Host 'attacker.example' is not allowed; to let it in, add the host to allowed_hosts (mcpsync serve --allow-host HOST)"),
        ({"Origin": "https://attacker.example"}, "Origin 'https://attacker.example' is not allowed; to let it in, add the origin to allowed_origins (mcpsync serve --allow-origin ORIGIN)"),
    ],
    ids=["host", "origin"],
)
def test_a_refused_request_logs_the_serve_option_that_lets_it_in(headers: dict[str, str], told: str) -> None:
    with HttpChild() as child:
        assert post(child.url, headers) == 403
    assert told in child.stderr, child.stderr
