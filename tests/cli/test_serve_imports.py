"""What `mcpsync serve` imports to answer `initialize`: what serving stdio needs, nothing more.

Start-up (spawn to first response) is mostly imports. jsonschema serves only some requests; the
gateway (and the client it drives), the HTTP transport, the config reader and the target loader
only some command lines; so each is imported when first needed. Checked on a real child run with
`python -X importtime`, which names every module it imports, from start-up to exit: behaviour, not
timing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._serving import serve_initialize_on_a_pipe

# Needed by some requests only (a tools/call to check arguments against a schema), or by some
# command lines only: --upstream/--config, --http, a client command, --auth-* (each verifier, and
# PyJWT with cryptography, the optional extra, only for the one chosen).
ONLY_WHEN_ASKED = (
    "mcpsync.auth.resource.jwt",
    "mcpsync.auth.resource.introspection",
    "mcpsync.auth.resource.static",
    "mcpsync.auth.client.oauth",
    "mcpsync.auth.client.client_credentials",
    "mcpsync.bus",
    "redis",
    "gunicorn",
    "mcpsync.gunicorn",
    "mcpsync.processes",
    "jwt",
    "cryptography",
    "jsonschema",
    "mcpsync.gateway",
    "mcpsync.client",
    "mcpsync.cli.config",
    "mcpsync.cli.clients",
    "mcpsync.cli.tasks",
    "mcpsync.cli.login",
    "mcpsync.auth.resource.guard",
    "mcpsync.auth.client",
    "mcpsync.transport.http.endpoint",
    "mcpsync.transport.http.serving",
    "mcpsync.httpd.server",
    "mcpsync.httpd._parse",
    "httptools",
    "tomllib",
    "subprocess",
    "socket",
    "mcpsync.telemetry",
    "opentelemetry",
    # Needed by rare requests only (a refused pydantic argument, a request that asks first), or for
    # random ids that os.urandom gives as well: each costs every start-up a millisecond or more.
    "json",
    "secrets",
    "random",
)


def _imported_while_serving(*args: str, cwd: Path) -> set[str]:
    """The modules a `mcpsync serve ARGS` child imports while it answers `initialize` and exits."""
    returncode, out, err = serve_initialize_on_a_pipe(*args, python=("-X", "importtime"), cwd=cwd)
    assert returncode == 0, err.decode()
    assert json.loads(out)["result"]["serverInfo"]["name"]
    lines = err.decode().splitlines()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:") and "|" in line}


def _unwanted(imported: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(module for module in imported if any(module == name or module.startswith(name + ".") for name in names))


@pytest.mark.parametrize("with_target", [False, True], ids=["demo", "target"])
def test_answering_initialize_imports_none_of_what_only_some_command_lines_need(tmp_path: Path, with_target: bool) -> None:
    args: list[str] = []
    unwanted = ONLY_WHEN_ASKED + (() if with_target else ("mcpsync.cli.loader",))
    if with_target:
        (tmp_path / "app.py").write_text("from mcpsync import Service\n\nservice = Service('app')\n")
        args = ["app.py"]
        unwanted += ("mcpsync.cli.demo",)
    imported = _imported_while_serving(*args, cwd=tmp_path)
    assert "mcpsync.server" in imported, "the child did not report its imports"
    assert _unwanted(imported, unwanted) == []
